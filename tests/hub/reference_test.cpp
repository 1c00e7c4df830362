// Model references, the options read from huggingface_hub's variables, and file selection.
#include "hub/reference.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "hub/options.h"
#include "hub/select.h"
#include "test_util.h"

namespace strata::test {
namespace {

namespace fs = std::filesystem;

TEST(HubReference, ParsesRepoRevisionAndSelector) {
  auto r = hub::parse_repo_ref("Qwen/Qwen3-8B");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->repo, "Qwen/Qwen3-8B");
  EXPECT_EQ(r->revision, "main");
  EXPECT_EQ(r->selector, "");
  EXPECT_EQ(r->to_string(), "Qwen/Qwen3-8B");

  r = hub::parse_repo_ref("unsloth/Qwen3-8B-GGUF@v2.0:Q4_K_M");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->repo, "unsloth/Qwen3-8B-GGUF");
  EXPECT_EQ(r->revision, "v2.0");
  EXPECT_EQ(r->selector, "Q4_K_M");
  EXPECT_EQ(r->to_string(), "unsloth/Qwen3-8B-GGUF@v2.0:Q4_K_M");

  r = hub::parse_repo_ref("org/name@refs/pr/12:sub/dir/model-q8_0.gguf");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->revision, "refs/pr/12");
  EXPECT_EQ(r->selector, "sub/dir/model-q8_0.gguf");

  r = hub::parse_repo_ref("hf.co/mlx-community/Qwen3.5-9B-MLX-4bit");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->repo, "mlx-community/Qwen3.5-9B-MLX-4bit");
  r = hub::parse_repo_ref("https://huggingface.co/org/name:Q8_0");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->repo, "org/name");
  EXPECT_EQ(r->selector, "Q8_0");
}

TEST(HubReference, RefusesWhatIsNoRepoId) {
  for (const char* text : {"",
                           "name",
                           "/abs/path",
                           "./rel/dir",
                           "../up/dir",
                           "a/b/c",
                           "org/",
                           "/name",
                           "org/na me",
                           "org--x/name",
                           "org/na..me",
                           "-org/name",
                           "org/name@",
                           "org/name:",
                           "org/name@a:b:c/../d",
                           "org/name:../x",
                           "org/name:a//b",
                           "org/name@bad~rev",
                           "~/models/x",
                           "C:\\models\\x"}) {
    EXPECT_FALSE(hub::parse_repo_ref(text)) << text;
  }
}

TEST(HubReference, AnExistingPathIsLocalElseARepo) {
  const fs::path dir = fs::path(scratch_dir("hub_reference")) / "org" / "model";
  fs::create_directories(dir);
  const hub::Reference local = hub::parse_reference(dir.string());
  EXPECT_EQ(local.kind, hub::Reference::Kind::kLocal);
  EXPECT_EQ(local.path, dir.string());
  // A relative "org/model" that exists in the working directory is that directory.
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.parent_path().parent_path());
  EXPECT_EQ(hub::parse_reference("org/model").kind, hub::Reference::Kind::kLocal);
  fs::current_path(cwd);
  const hub::Reference repo = hub::parse_reference("org/model-that-is-not-here:Q4_0");
  EXPECT_EQ(repo.kind, hub::Reference::Kind::kRepo);
  EXPECT_EQ(repo.repo.repo, "org/model-that-is-not-here");
  EXPECT_EQ(repo.repo.selector, "Q4_0");
  // Not a path and no repo id: local, for the loader to report missing.
  EXPECT_EQ(hub::parse_reference("/no/such/dir").kind, hub::Reference::Kind::kLocal);
  EXPECT_EQ(hub::parse_reference("missing.gguf").kind, hub::Reference::Kind::kLocal);
}

TEST(HubReference, CacheFolderNameAndCommitHash) {
  EXPECT_EQ(hub::repo_folder_name("Qwen/Qwen3-8B"), "models--Qwen--Qwen3-8B");
  EXPECT_TRUE(hub::is_commit_hash("0123456789abcdef0123456789abcdef01234567"));
  EXPECT_FALSE(hub::is_commit_hash("main"));
  EXPECT_FALSE(hub::is_commit_hash("0123456789ABCDEF0123456789abcdef01234567"));
}

TEST(HubOptions, ReadsHuggingfaceHubVariables) {
  hub::HubOptions o = hub::options_from_environment({{"HOME", "/home/u"}});
  EXPECT_EQ(o.endpoint, "https://huggingface.co");
  EXPECT_EQ(o.cache_dir, fs::path("/home/u/.cache/huggingface/hub"));
  EXPECT_FALSE(o.offline);
  EXPECT_EQ(o.token, "");

  o = hub::options_from_environment({{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "/xdg"}});
  EXPECT_EQ(o.cache_dir, fs::path("/xdg/huggingface/hub"));
  o = hub::options_from_environment({{"HF_HOME", "/hf"}, {"XDG_CACHE_HOME", "/xdg"}});
  EXPECT_EQ(o.cache_dir, fs::path("/hf/hub"));
  o = hub::options_from_environment({{"HF_HOME", "/hf"},
                                     {"HF_HUB_CACHE", "/cache"},
                                     {"HF_ENDPOINT", "http://127.0.0.1:5/"},
                                     {"HF_TOKEN", " hf_abc \n"},
                                     {"HF_HUB_OFFLINE", "1"}});
  EXPECT_EQ(o.cache_dir, fs::path("/cache"));
  EXPECT_EQ(o.endpoint, "http://127.0.0.1:5");
  EXPECT_EQ(o.token, "hf_abc");
  EXPECT_TRUE(o.offline);
  EXPECT_TRUE(hub::options_from_environment({{"HF_HUB_OFFLINE", "TRUE"}}).offline);
  EXPECT_FALSE(hub::options_from_environment({{"HF_HUB_OFFLINE", "0"}}).offline);

  // The token file `hf auth login` writes, when HF_TOKEN is not set.
  const fs::path home = scratch_dir("hub_options_home");
  write_bytes((home / "token").string(), "hf_from_file\n");
  EXPECT_EQ(hub::options_from_environment({{"HF_HOME", home.string()}}).token, "hf_from_file");
  EXPECT_EQ(
      hub::options_from_environment({{"HF_HOME", home.string()}, {"HF_TOKEN", "hf_env"}}).token,
      "hf_env");

  expect_error(
      [] {
        hub::options_from_environment({{"HF_HUB_OFFLINE", "maybe"}});
      },
      ErrorKind::kInvalidInput, {"HF_HUB_OFFLINE"});
  expect_error(
      [] {
        hub::options_from_environment({{"HF_ENDPOINT", "ftp://x"}});
      },
      ErrorKind::kInvalidInput, {"HF_ENDPOINT"});
}

hub::RepoRef ref(const std::string& text) { return *hub::parse_repo_ref(text); }

TEST(HubSelect, ASafetensorsCheckpointBringsItsSidecars) {
  const std::vector<std::string> files = {".gitattributes",
                                          "README.md",
                                          "config.json",
                                          "generation_config.json",
                                          "tokenizer.json",
                                          "tokenizer_config.json",
                                          "special_tokens_map.json",
                                          "chat_template.json",
                                          "vocab.json",
                                          "merges.txt",
                                          "model.safetensors",
                                          "pytorch_model.bin",
                                          "original/consolidated.safetensors"};
  const hub::Selection s = hub::select_files(files, ref("o/m"));
  EXPECT_EQ(s.format, hub::WeightsFormat::kSafetensors);
  EXPECT_EQ(s.files,
            (std::vector<std::string>{"config.json", "generation_config.json", "tokenizer.json",
                                      "tokenizer_config.json", "chat_template.json",
                                      "special_tokens_map.json", "model.safetensors"}));
  EXPECT_EQ(s.index, "");
}

TEST(HubSelect, AnIndexNamesTheShards) {
  const std::vector<std::string> files = {
      "config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
      "model-00002-of-00002.safetensors", "consolidated.safetensors"};
  const hub::Selection s = hub::select_files(files, ref("o/m"));
  EXPECT_EQ(s.files, (std::vector<std::string>{"config.json", "model.safetensors.index.json"}));
  EXPECT_EQ(s.index, "model.safetensors.index.json");
  const Json index = {{"weight_map",
                       {{"b", "model-00002-of-00002.safetensors"},
                        {"a", "model-00001-of-00002.safetensors"},
                        {"c", "model-00001-of-00002.safetensors"}}}};
  EXPECT_EQ(hub::index_shards(index, files, ref("o/m"), s.index),
            (std::vector<std::string>{"model-00001-of-00002.safetensors",
                                      "model-00002-of-00002.safetensors"}));
  expect_error(
      [&] {
        hub::index_shards({{"weight_map", {{"a", "model-00003-of-00003.safetensors"}}}}, files,
                          ref("o/m"), s.index);
      },
      ErrorKind::kNotFound, {"model-00003-of-00003.safetensors", "lacks"});
  expect_error(
      [&] {
        hub::index_shards({{"weight_map", {{"a", "../../etc/passwd"}}}}, files, ref("o/m"),
                          s.index);
      },
      ErrorKind::kInvalidInput, {"not a file in it"});
}

TEST(HubSelect, WeightsWithoutConfigOrNoWeightsAreErrors) {
  expect_error([] { hub::select_files({"model.safetensors"}, ref("o/m")); }, ErrorKind::kNotFound,
               {"no config.json"});
  expect_error(
      [] {
        hub::select_files({"config.json", "pytorch_model.bin"}, ref("o/m"));
      },
      ErrorKind::kNotFound, {"no weights strata loads"});
}

TEST(HubSelect, GgufByQuantTagOrFileName) {
  const std::vector<std::string> files = {"README.md",
                                          "Model-Q4_K_M.gguf",
                                          "Model-Q4_K_S.gguf",
                                          "model.Q8_0.gguf",
                                          "UD-Q4_K_XL/model-UD-Q4_K_XL.gguf",
                                          "mmproj-model-f16.gguf"};
  EXPECT_EQ(hub::select_files(files, ref("o/m:Q4_K_M")).gguf, "Model-Q4_K_M.gguf");
  EXPECT_EQ(hub::select_files(files, ref("o/m:q4_k_s")).gguf, "Model-Q4_K_S.gguf");
  EXPECT_EQ(hub::select_files(files, ref("o/m:Q8_0")).gguf, "model.Q8_0.gguf");
  EXPECT_EQ(hub::select_files(files, ref("o/m:ud-q4_k_xl")).gguf,
            "UD-Q4_K_XL/model-UD-Q4_K_XL.gguf");
  EXPECT_EQ(hub::select_files(files, ref("o/m:mmproj-model-f16.gguf")).gguf,
            "mmproj-model-f16.gguf");
}

TEST(HubSelect, GgufChoicesThatDoNotPickOneFile) {
  const std::vector<std::string> files = {"a-Q4_K_M.gguf", "a-Q8_0.gguf", "mmproj-F16.gguf"};
  expect_error([&] { hub::select_files(files, ref("o/m")); }, ErrorKind::kInvalidInput,
               {"has 2 GGUF files", "a-Q4_K_M.gguf, a-Q8_0.gguf"});
  expect_error([&] { hub::select_files(files, ref("o/m:F16")); }, ErrorKind::kNotFound,
               {"no GGUF file of o/m matches 'F16'"});
  expect_error(
      [&] {
        hub::select_files({"config.json", "x.txt"}, ref("o/m:x.txt"));
      },
      ErrorKind::kInvalidInput, {"not a GGUF model"});
  EXPECT_EQ(hub::select_files({"README.md", "only-Q4_0.gguf"}, ref("o/m")).gguf, "only-Q4_0.gguf");
  const std::vector<std::string> split = {"Q4_K_M/m-Q4_K_M-00001-of-00002.gguf",
                                          "Q4_K_M/m-Q4_K_M-00002-of-00002.gguf", "m-Q8_0.gguf"};
  expect_error([&] { hub::select_files(split, ref("o/m:Q4_K_M")); }, ErrorKind::kUnsupported,
               {"split into 2 files"});
  EXPECT_EQ(hub::select_files(split, ref("o/m:Q8_0")).gguf, "m-Q8_0.gguf");
}

}  // namespace
}  // namespace strata::test
