// strata cache ls and clear on a state directory of real prefix-cache files (written by
// runtime::StateStore for the llama and qwen35 test checkpoints): ls reads the headers, lists what
// it cannot read and changes nothing; clear removes only the store's files and the directories it
// empties, and never without --yes when it cannot ask.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <numeric>

#include "cli_util.h"
#include "core/json.h"
#include "model/model.h"
#include "runtime/state_store.h"
#include "test_util.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using test::CliResult;
using test::strata_cli;

constexpr int64_t kCapacity = 64;

// 2024-05-06T07:08:09Z, set on the files whose listing is checked.
fs::file_time_type fixed_time() {
  using namespace std::chrono;
  return file_clock::from_sys(sys_days{year{2024} / May / day{6}} + hours{7} + minutes{8} +
                              seconds{9});
}

// A model's directory under `root`, as the engine names it, and files in it written by its store.
struct ModelFiles {
  std::string fingerprint;
  fs::path dir;
  std::vector<fs::path> files;
};

ModelFiles write_states(const fs::path& root, const std::string& model_name,
                        const std::vector<std::pair<uint64_t, int64_t>>& keys_and_tokens) {
  auto m = model::load_model(test::test_fixture("models/" + model_name));
  const model::ModelState layout = m->new_state(kCapacity);
  ModelFiles out{m->fingerprint(),
                 runtime::state_directory(root, m->fingerprint(), "cpu", kCapacity, layout),
                 {}};
  runtime::StateStore store(out.dir, m->fingerprint(), layout, kCapacity);
  for (const auto& [key, n] : keys_and_tokens) {
    runtime::StateBytes state;
    state.tokens.resize(static_cast<size_t>(n));
    std::iota(state.tokens.begin(), state.tokens.end(), 3);
    std::vector<uint8_t> kv, recurrent;
    for (const runtime::StateSection& s : runtime::state_sections(layout, n)) {
      std::vector<uint8_t>& part = s.token_indexed ? kv : recurrent;
      part.resize(part.size() + s.bytes, 7);
    }
    state.kv = runtime::HostPages::plain()->take_copy(kv);
    state.recurrent = runtime::HostPages::plain()->take_copy(recurrent);
    store.write_now(key, state);
    out.files.push_back(store.path(key));
    fs::last_write_time(store.path(key), fixed_time());
  }
  return out;
}

// Every regular file under root, relative to it.
std::vector<std::string> files_under(const fs::path& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), root).string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string state_dir_flag(const fs::path& root) { return " --state-dir '" + root.string() + "'"; }

TEST(CacheCli, LsListsEachModelDirectoryAndItsEntriesFromTheHeaders) {
  const fs::path root = test::scratch_dir("cache_cli_ls");
  const ModelFiles llama = write_states(root, "llama", {{0xa1, 10}, {0xb2, 20}});
  const ModelFiles qwen = write_states(root, "qwen35", {{0x1234, 5}});
  test::write_bytes((llama.dir / "00000000000000ff.state").string(), "not a state at all");
  test::write_bytes((llama.dir / "notes.txt").string(), "not the cache's");
  fs::last_write_time(llama.dir / "00000000000000ff.state", fixed_time());
  const std::vector<std::string> before = files_under(root);

  const CliResult r = strata_cli("cache ls --json" + state_dir_flag(root), false);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["root"], root.string());
  EXPECT_EQ(j["exists"], true);
  EXPECT_EQ(j["entries"], 4);
  ASSERT_EQ(j["models"].size(), 2u);
  for (const Json& m : j["models"]) {
    const bool is_llama = m["dir"] == llama.dir.filename().string();
    const ModelFiles& want = is_llama ? llama : qwen;
    EXPECT_EQ(m["dir"], want.dir.filename().string());
    EXPECT_EQ(m["fingerprint"], want.fingerprint);
    const Json& files = m["files"];
    ASSERT_EQ(files.size(), is_llama ? 3u : 1u) << m.dump(2);
    uint64_t bytes = 0;
    for (const Json& f : files) bytes += f["bytes"].get<uint64_t>();
    EXPECT_EQ(m["bytes"], bytes);
    EXPECT_EQ(m["entries"], files.size());
    if (is_llama) {
      EXPECT_EQ(files[0]["key"], "00000000000000a1");
      EXPECT_EQ(files[0]["status"], "ok");
      EXPECT_EQ(files[0]["tokens"], 10);
      EXPECT_EQ(files[0]["bytes"], fs::file_size(llama.files[0]));
      EXPECT_EQ(files[0]["modified"], "2024-05-06T07:08:09Z");
      EXPECT_EQ(files[1]["key"], "00000000000000b2");
      EXPECT_EQ(files[1]["tokens"], 20);
      EXPECT_EQ(files[1]["bytes"], fs::file_size(llama.files[1]));
      EXPECT_EQ(files[2]["key"], "00000000000000ff");
      EXPECT_EQ(files[2]["status"], "unreadable");
      EXPECT_NE(files[2]["error"].get<std::string>().find("bad magic"), std::string::npos)
          << files[2];
      EXPECT_FALSE(files[2].contains("tokens"));
    } else {
      EXPECT_EQ(files[0]["key"], "0000000000001234");
      EXPECT_EQ(files[0]["tokens"], 5);
      EXPECT_EQ(files[0]["bytes"], fs::file_size(qwen.files[0]));
    }
  }

  const CliResult text = strata_cli("cache ls" + state_dir_flag(root), false);
  ASSERT_EQ(text.exit_code, 0) << text.out << text.err;
  for (const std::string& part :
       {root.string(), llama.dir.filename().string(), qwen.dir.filename().string(),
        llama.fingerprint, qwen.fingerprint, std::string("00000000000000a1"),
        std::string("0000000000001234"), std::string("2024-05-06T07:08:09Z"),
        std::string("unreadable: "), std::string("2 model directories")})
    EXPECT_NE(text.out.find(part), std::string::npos) << "no '" << part << "' in:\n" << text.out;
  EXPECT_EQ(files_under(root), before);  // ls changes nothing
}

TEST(CacheCli, LsOfAStateDirectoryThatDoesNotExistSaysTheCacheIsEmpty) {
  const fs::path root = fs::path(test::scratch_dir("cache_cli_missing")) / "never-made";
  const CliResult r = strata_cli("cache ls" + state_dir_flag(root), false);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("empty"), std::string::npos) << r.out;
  const CliResult j = strata_cli("cache ls --json" + state_dir_flag(root), false);
  ASSERT_EQ(j.exit_code, 0) << j.out << j.err;
  const Json doc = Json::parse(j.out);
  EXPECT_EQ(doc["exists"], false);
  EXPECT_EQ(doc["entries"], 0);
  EXPECT_TRUE(doc["models"].empty());
  EXPECT_FALSE(fs::exists(root));
}

TEST(CacheCli, ClearOfAStateDirectoryThatDoesNotExistRemovesNothing) {
  const fs::path root = fs::path(test::scratch_dir("cache_cli_clear_missing")) / "never-made";
  const CliResult r = strata_cli("cache clear --yes" + state_dir_flag(root), false);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("nothing to remove"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(root));
}

// The state directory also comes from $STRATA_STATE_DIR, as every setting does.
TEST(CacheCli, LsReadsTheStateDirectoryFromTheEnvironment) {
  const fs::path root = test::scratch_dir("cache_cli_env");
  write_states(root, "llama", {{0xc3, 4}});
  const CliResult r =
      strata_cli("cache ls --json", false, "STRATA_STATE_DIR='" + root.string() + "' ");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Json::parse(r.out)["entries"], 1);
}

TEST(CacheCli, ClearRemovesOnlyStateFilesAndTheDirectoriesItEmpties) {
  const fs::path root = test::scratch_dir("cache_cli_clear");
  const ModelFiles llama = write_states(root, "llama", {{0xa1, 10}, {0xb2, 20}});
  const ModelFiles qwen = write_states(root, "qwen35", {{0x1234, 5}});
  test::write_bytes((qwen.dir / "00000000000000cc.state.tmp").string(), "a write cut short");
  test::write_bytes((llama.dir / "notes.txt").string(), "kept");
  test::write_bytes((root / "README").string(), "kept");
  fs::create_directories(root / "not-a-model-dir");
  test::write_bytes((root / "not-a-model-dir" / "00000000000000a1.state").string(), "kept");

  const CliResult r =
      strata_cli("cache clear --yes" + state_dir_flag(root) + " < /dev/null", false);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Removed 4 files"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(qwen.dir));  // emptied, so removed
  EXPECT_TRUE(fs::exists(llama.dir));  // it holds notes.txt
  const std::vector<std::string> want = {"README", llama.dir.filename().string() + "/notes.txt",
                                         "not-a-model-dir/00000000000000a1.state"};
  EXPECT_EQ(files_under(root), want);
}

TEST(CacheCli, ClearOfOneModelDirectoryLeavesTheOthers) {
  const fs::path root = test::scratch_dir("cache_cli_clear_one");
  const ModelFiles llama = write_states(root, "llama", {{0xa1, 10}});
  const ModelFiles qwen = write_states(root, "qwen35", {{0x1234, 5}});
  const CliResult r = strata_cli("cache clear --yes --model-dir " + qwen.dir.filename().string() +
                                     state_dir_flag(root) + " < /dev/null",
                                 false);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Removed 1 file"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(qwen.dir));
  EXPECT_TRUE(fs::exists(llama.files[0]));
}

TEST(CacheCli, ClearRefusesWithoutYesWhenStdinIsNotATerminal) {
  const fs::path root = test::scratch_dir("cache_cli_refuse");
  write_states(root, "llama", {{0xa1, 10}});
  const std::vector<std::string> before = files_under(root);
  const CliResult r = strata_cli("cache clear" + state_dir_flag(root) + " < /dev/null", false);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--yes"), std::string::npos) << r.err;
  EXPECT_EQ(files_under(root), before);
}

TEST(CacheCli, ClearOfAModelDirectoryThatIsNotThereIsAClearError) {
  const fs::path root = test::scratch_dir("cache_cli_bad_dir");
  write_states(root, "llama", {{0xa1, 10}});
  const std::vector<std::string> before = files_under(root);
  const CliResult bad =
      strata_cli("cache clear --yes --model-dir ../etc" + state_dir_flag(root), false);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("16 hex digits"), std::string::npos) << bad.err;
  const CliResult missing =
      strata_cli("cache clear --yes --model-dir 0123456789abcdef" + state_dir_flag(root), false);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("no model directory 0123456789abcdef"), std::string::npos)
      << missing.err;
  EXPECT_EQ(files_under(root), before);
}

}  // namespace
}  // namespace strata
