// strata pull / ls / rm and --model REF as processes against the mock hub (HF_ENDPOINT pointing at
// it, the cache in a scratch HF_HOME).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli_util.h"
#include "hub_test_util.h"

namespace strata::test {
namespace {

namespace fs = std::filesystem;

const char* const kDemoCommit = "d3e0d3e0d3e0d3e0d3e0d3e0d3e0d3e0d3e0d3e0";

// Variables for a strata process: the mock hub, a scratch HF_HOME, no token, online unless told.
std::string hub_env(const MockHub& hub, const fs::path& home, const std::string& more = "") {
  return "HF_ENDPOINT=" + hub.endpoint() + " HF_HOME=" + home.string() +
         " HF_HUB_CACHE= HUGGINGFACE_HUB_CACHE= HF_TOKEN= HUGGING_FACE_HUB_TOKEN= HF_TOKEN_PATH= "
         "HF_HUB_OFFLINE=0 " +
         more + " ";
}

std::string demo_dir() { return test_fixture("../../models/strata-demo"); }

TEST(HubCli, PullLsRm) {
  MockHub hub(fixture_repos());
  const fs::path home = scratch_dir("hub_cli_pull");
  const std::string env = hub_env(hub, home);
  const fs::path cache = home / "hub";
  const std::string commit = fixture_repos().front().commit;

  CliResult r = strata_cli("pull strata-test/tiny-model", false, env);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const fs::path snapshot = cache / "models--strata-test--tiny-model" / "snapshots" / commit;
  EXPECT_EQ(r.out, snapshot.string() + "\n");
  EXPECT_NE(r.err.find("strata-test/tiny-model at commit 4f1d2c3b: 8 files"), std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::is_symlink(snapshot / "model-00002-of-00002.safetensors"));

  r = strata_cli("pull strata-test/tiny-gguf:Q8_0", false, env);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(r.out.ends_with("/tiny-Q8_0.gguf\n")) << r.out;

  // The cache's models, and a directory given beside it.
  r = strata_cli("ls " + demo_dir(), false, env);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("NAME"), std::string::npos) << r.out;
  // The line that starts with `name`, its columns split at runs of spaces.
  auto row = [&](const std::string& name) {
    std::vector<std::string> columns;
    const size_t at = r.out.find("\n" + name + " ");
    if (at == std::string::npos) return columns;
    std::istringstream line(r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1));
    for (std::string c; line >> c;) columns.push_back(c);
    return columns;
  };
  EXPECT_EQ(row("strata-test/tiny-model"),
            (std::vector<std::string>{"strata-test/tiny-model", "main", "4f1d2c3b", "736", "B",
                                      "safetensors", "qwen3"}))
      << r.out;
  EXPECT_EQ(row("strata-test/tiny-gguf:tiny-Q8_0.gguf"),
            (std::vector<std::string>{"strata-test/tiny-gguf:tiny-Q8_0.gguf", "main", "9e8d7c6b",
                                      "49", "B", "GGUF", "-"}))
      << r.out;
  const std::vector<std::string> demo = row(demo_dir());  // its size is the demo model's
  ASSERT_EQ(demo.size(), 7u) << r.out;
  EXPECT_EQ(demo[1] + " " + demo[2] + " " + demo[5] + " " + demo[6],
            "- - safetensors qwen3_5_text");
  r = strata_cli("ls --json", false, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json listed = nlohmann::json::parse(r.out);
  EXPECT_EQ(listed["cache"], cache.string());
  ASSERT_EQ(listed["models"].size(), 2u) << r.out;
  EXPECT_EQ(listed["models"][0]["name"], "strata-test/tiny-gguf:tiny-Q8_0.gguf");
  EXPECT_EQ(listed["models"][0]["format"], "GGUF");
  EXPECT_EQ(listed["models"][1]["name"], "strata-test/tiny-model");
  EXPECT_EQ(listed["models"][1]["format"], "safetensors");
  EXPECT_EQ(listed["models"][1]["family"], "qwen3");
  EXPECT_EQ(listed["models"][1]["commit"], commit);
  EXPECT_EQ(listed["models"][1]["revision"], "main");

  r = strata_cli("rm strata-test/tiny-model", false, env);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("removed strata-test/tiny-model"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(cache / "models--strata-test--tiny-model"));
  EXPECT_TRUE(fs::exists(cache / "models--strata-test--tiny-gguf"));
  r = strata_cli("ls", false, env);
  EXPECT_EQ(r.out.find("tiny-model"), std::string::npos) << r.out;

  // rm refuses what it does not know.
  r = strata_cli("rm strata-test/tiny-model", true, env);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("error: strata-test/tiny-model is not in the hub cache"), std::string::npos)
      << r.out;
  r = strata_cli("rm ./models/strata-demo", true, env);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("is not one"), std::string::npos) << r.out;
  r = strata_cli("rm strata-test/tiny-gguf:Q8_0", true, env);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("without @revision or :file"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(cache / "models--strata-test--tiny-gguf"));
}

TEST(HubCli, PullErrorsAreClear) {
  MockHub hub(fixture_repos());
  hub.gate("strata-test/tiny-gguf", "hf_right");
  const fs::path home = scratch_dir("hub_cli_errors");
  const std::string env = hub_env(hub, home);

  CliResult r = strata_cli("pull strata-test/no-such-model", true, env);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("error: repository strata-test/no-such-model not found"), std::string::npos)
      << r.out;
  r = strata_cli("pull strata-test/tiny-gguf:Q8_0", true, env);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("needs a token"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("HF_TOKEN"), std::string::npos) << r.out;
  r = strata_cli("pull strata-test/tiny-gguf:Q8_0", true, hub_env(hub, home, "HF_TOKEN=hf_right"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  r = strata_cli("pull " + demo_dir(), true, env);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("a local path, which needs no pull"), std::string::npos) << r.out;
  r = strata_cli("pull strata-test/tiny-model", true, hub_env(hub, home, "HF_HUB_OFFLINE=1"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("HF_HUB_OFFLINE is set"), std::string::npos) << r.out;
  EXPECT_EQ(strata_cli("pull", true, env).exit_code, 2);
}

TEST(HubCli, ModelRefFetchesOnFirstUseThenServesTheCache) {
  MockHub hub({repo_from_dir("strata-test/demo", kDemoCommit, demo_dir())});
  const fs::path home = scratch_dir("hub_cli_model_ref");
  const std::string gen = "generate --prompt 'Hello there' -n 8 -t 0 --json --model ";
  const CliResult local = strata_cli(gen + demo_dir(), false);
  ASSERT_EQ(local.exit_code, 0) << local.out << local.err;

  const CliResult fetched = strata_cli(gen + "strata-test/demo", false, hub_env(hub, home));
  ASSERT_EQ(fetched.exit_code, 0) << fetched.out << fetched.err;
  EXPECT_EQ(fetched.out, local.out);
  EXPECT_EQ(hub.requests("GET", "/lfs-blobs/").size(), 2u);  // model.safetensors, tokenizer.json
  const fs::path snapshot = home / "hub" / "models--strata-test--demo" / "snapshots" / kDemoCommit;
  EXPECT_TRUE(fs::is_symlink(snapshot / "model.safetensors"));

  // The second use, offline: the cache alone, not a request.
  hub.clear_requests();
  const CliResult offline =
      strata_cli(gen + "strata-test/demo", false, hub_env(hub, home, "HF_HUB_OFFLINE=1"));
  ASSERT_EQ(offline.exit_code, 0) << offline.out << offline.err;
  EXPECT_EQ(offline.out, local.out);
  EXPECT_TRUE(hub.requests().empty());

  // Offline and not cached: a clear error.
  const CliResult missing =
      strata_cli(gen + "strata-test/other", true, hub_env(hub, home, "HF_HUB_OFFLINE=1"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.out.find("error: HF_HUB_OFFLINE is set"), std::string::npos) << missing.out;
  EXPECT_NE(missing.out.find("strata-test/other is not in the hub cache"), std::string::npos)
      << missing.out;
}

}  // namespace
}  // namespace strata::test
