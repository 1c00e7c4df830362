// The cache tree strata pull writes against the one huggingface_hub.snapshot_download writes for
// the same fake repositories (tests/fixtures/hub/snapshot_download_listing.txt, made by
// tools/hub_listing.py on a machine that has huggingface_hub).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "hub/cache.h"
#include "hub/pull.h"
#include "hub_test_util.h"

namespace strata::test {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The fixture's pulls, in order, into a fresh cache; its listing.
std::string strata_listing(const std::string& scratch) {
  MockHub hub(fixture_repos());
  const hub::HubOptions o = mock_options(hub, scratch);
  for (const FakePull& p : fixture_pulls()) {
    const hub::PullResult r = hub::pull(*hub::parse_repo_ref(p.ref), o);
    std::vector<std::string> files = r.files;
    std::ranges::sort(files);
    EXPECT_EQ(files, p.files) << p.ref;
  }
  return cache_listing(o.cache_dir);
}

TEST(HubCache, ListingNamesFoldersLinksFilesAndRefs) {
  const std::string listing = strata_listing("hub_listing");
  const std::string model = "models--strata-test--tiny-model/";
  const std::string commit = fixture_repos().front().commit;
  const std::string config = git_blob_id(fixture_repos().front().find("config.json")->content);
  const std::string bf16 = sha256_hex(fixture_repos()[1].find("BF16/tiny-BF16.gguf")->content);
  for (const std::string& line :
       {model + "blobs/", model + "refs/", model + "snapshots/", model + "refs/main 40 " + commit,
        model + "refs/v1.0 40 " + commit,
        model + "snapshots/" + commit + "/config.json -> ../../blobs/" + config,
        model + "blobs/" + config + " " +
            std::to_string(fixture_repos().front().find("config.json")->content.size()),
        "models--strata-test--tiny-gguf/snapshots/" + fixture_repos()[1].commit + "/BF16/",
        "models--strata-test--tiny-gguf/snapshots/" + fixture_repos()[1].commit +
            "/BF16/tiny-BF16.gguf -> ../../../blobs/" + bf16}) {
    EXPECT_NE(listing.find(line + "\n"), std::string::npos) << line << "\nin:\n" << listing;
  }
  EXPECT_EQ(listing.find(".incomplete"), std::string::npos);
  EXPECT_EQ(listing.find(".locks"), std::string::npos);
  // Sorted by path, one entry a line.
  std::vector<std::string> paths;
  std::istringstream lines(listing);
  for (std::string line; std::getline(lines, line);)
    paths.push_back(line.substr(0, line.find(' ')));
  EXPECT_TRUE(std::ranges::is_sorted(paths));
  // tiny-model: blobs/ and 8 blobs, refs/ and 2 refs, snapshots/, the commit and 8 links;
  // tiny-gguf: blobs/ and 2 blobs, refs/ and main, snapshots/, the commit, BF16/ and 2 links.
  EXPECT_EQ(paths.size(), 22u + 10u) << listing;
}

TEST(HubCache, TreeMatchesHuggingfaceHub) {
  const fs::path fixture = test_fixture("hub/snapshot_download_listing.txt");
  if (!fs::exists(fixture))
    GTEST_SKIP() << fixture.string()
                 << " is absent: make it with tools/hub_listing.py on a machine that has "
                    "huggingface_hub (pip install huggingface_hub), then commit it";
  std::string expected;  // the listing without its "# made by" lines
  std::istringstream lines(read(fixture));
  for (std::string line; std::getline(lines, line);)
    if (!line.starts_with('#')) expected += line + "\n";
  EXPECT_EQ(strata_listing("hub_listing_vs_hf"), expected);
}

}  // namespace
}  // namespace strata::test
