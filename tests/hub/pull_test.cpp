// hub::pull against the loopback mock hub: the cache tree and contents, tokens, 404s, retries,
// resumed downloads, checksums, offline mode and GGUF selection.
#include "hub/pull.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "hub/cache.h"
#include "hub_test_util.h"

namespace strata::test {
namespace {

namespace fs = std::filesystem;

const char* const kModel = "strata-test/tiny-model";
const char* const kGguf = "strata-test/tiny-gguf";

FakeRepo fixture_repo(const std::string& id) {
  for (FakeRepo& r : fixture_repos())
    if (r.id == id) return r;
  throw std::runtime_error("no fixture repo " + id);
}

std::vector<std::string> pull_files(const std::string& ref) {
  for (const FakePull& p : fixture_pulls())
    if (p.ref == ref) return p.files;
  throw std::runtime_error("no fixture pull " + ref);
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

hub::RepoRef ref_of(const std::string& text) {
  auto ref = hub::parse_repo_ref(text);
  if (!ref) throw std::runtime_error("not a repo ref: " + text);
  return *ref;
}

// Every blob and pointer of `repo`'s snapshot for `files`: a relative symlink to the blob named by
// the file's etag, with the file's contents; no .incomplete file anywhere.
void expect_snapshot(const hub::HubOptions& o, const FakeRepo& repo,
                     const std::vector<std::string>& files) {
  const hub::RepoCache cache(o.cache_dir, repo.id);
  EXPECT_EQ(hub::snapshot_files(cache.snapshot(repo.commit)), files);
  for (const std::string& path : files) {
    const FakeFile* f = repo.find(path);
    ASSERT_NE(f, nullptr) << path;
    const fs::path pointer = cache.pointer(repo.commit, path);
    ASSERT_TRUE(fs::is_symlink(pointer)) << pointer;
    const std::string etag = f->lfs ? sha256_hex(f->content) : git_blob_id(f->content);
    std::string up;
    for (size_t i = 0; i < 2 + static_cast<size_t>(std::ranges::count(path, '/')); ++i) up += "../";
    EXPECT_EQ(fs::read_symlink(pointer).string(), up + "blobs/" + etag) << path;
    EXPECT_EQ(read(pointer), f->content) << path;
    EXPECT_EQ(read(cache.blob(etag)), f->content) << path;
  }
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(o.cache_dir))
    EXPECT_FALSE(e.path().string().ends_with(".incomplete")) << e.path();
}

TEST(HubPull, FullPullLaysOutTheCacheTreeAndContents) {
  MockHub hub(fixture_repos());
  const hub::HubOptions o = mock_options(hub, "hub_full_pull");
  const FakeRepo repo = fixture_repo(kModel);
  const hub::PullResult r = hub::pull(ref_of(kModel), o);

  EXPECT_EQ(r.commit, repo.commit);
  EXPECT_EQ(r.snapshot,
            o.cache_dir / "models--strata-test--tiny-model" / "snapshots" / repo.commit);
  EXPECT_EQ(r.model_path, r.snapshot);
  EXPECT_EQ(r.format, hub::WeightsFormat::kSafetensors);
  EXPECT_FALSE(r.from_cache);
  expect_snapshot(o, repo, pull_files(kModel));
  EXPECT_EQ(read(o.cache_dir / "models--strata-test--tiny-model" / "refs" / "main"), repo.commit);
  EXPECT_FALSE(fs::exists(r.snapshot / "README.md"));
  EXPECT_FALSE(fs::exists(r.snapshot / "original"));
  uint64_t bytes = 0;
  for (const std::string& f : pull_files(kModel)) bytes += repo.find(f)->content.size();
  EXPECT_EQ(r.bytes_downloaded, bytes);
  // LFS files were fetched from the blob URL the resolve URL redirected to.
  EXPECT_EQ(hub.requests("GET", "/lfs-blobs/").size(), 3u);

  // A second pull finds everything in the snapshot: only the repo info is asked for.
  hub.clear_requests();
  const hub::PullResult again = hub::pull(ref_of(kModel), o);
  EXPECT_EQ(again.bytes_downloaded, 0u);
  EXPECT_EQ(again.model_path, r.model_path);
  EXPECT_EQ(hub.requests().size(), 1u);
  EXPECT_EQ(hub.requests("GET", "/api/models/strata-test/tiny-model/revision/main").size(), 1u);
}

TEST(HubPull, ATagWritesItsRefAndSharesTheSnapshot) {
  MockHub hub(fixture_repos());
  const hub::HubOptions o = mock_options(hub, "hub_tag_pull");
  const hub::PullResult main = hub::pull(ref_of(kModel), o);
  hub.clear_requests();
  const hub::PullResult tag = hub::pull(ref_of(std::string(kModel) + "@v1.0"), o);
  EXPECT_EQ(tag.snapshot, main.snapshot);
  EXPECT_EQ(tag.bytes_downloaded, 0u);
  EXPECT_EQ(read(o.cache_dir / "models--strata-test--tiny-model" / "refs" / "v1.0"), main.commit);
  EXPECT_EQ(hub.requests("GET", "/revision/v1.0").size(), 1u);
}

TEST(HubPull, ProgressFollowsEveryFileAndByte) {
  MockHub hub(fixture_repos());
  const hub::HubOptions o = mock_options(hub, "hub_progress");
  std::vector<std::string> finished;
  hub::PullProgress last;
  const hub::PullResult r = hub::pull(ref_of(kModel), o, [&](const hub::PullProgress& p) {
    if (p.file_finished) finished.push_back(p.file);
    last = p;
  });
  std::ranges::sort(finished);
  EXPECT_EQ(finished, pull_files(kModel));
  EXPECT_EQ(last.repo, kModel);
  EXPECT_EQ(last.files_done, last.files_total);
  EXPECT_EQ(last.files_total, pull_files(kModel).size());
  EXPECT_EQ(last.bytes_done, last.bytes_total);
  EXPECT_EQ(last.bytes_total, r.bytes_downloaded);
}

TEST(HubPull, GatedRepoNeedsAToken) {
  MockHub hub(fixture_repos());
  hub.gate(kModel, "hf_secret");
  hub::HubOptions o = mock_options(hub, "hub_gated");
  expect_error([&] { hub::pull(ref_of(kModel), o); }, ErrorKind::kInvalidInput,
               {"strata-test/tiny-model needs a token", "HTTP 401", "set HF_TOKEN"});
  o.token = "hf_wrong";
  expect_error([&] { hub::pull(ref_of(kModel), o); }, ErrorKind::kInvalidInput,
               {"no access to strata-test/tiny-model", "HTTP 403"});
  EXPECT_FALSE(fs::exists(o.cache_dir / "models--strata-test--tiny-model" / "refs"));
  o.token = "hf_secret";
  hub.clear_requests();
  hub::pull(ref_of(kModel), o);
  expect_snapshot(o, fixture_repo(kModel), pull_files(kModel));
  const auto heads = hub.requests("HEAD", "/resolve/");
  ASSERT_FALSE(heads.empty());
  for (const RecordedRequest& r : heads) EXPECT_EQ(r.authorization, "Bearer hf_secret");
}

TEST(HubPull, UnknownRepositoryOrRevisionIsNotFound) {
  MockHub hub(fixture_repos());
  const hub::HubOptions o = mock_options(hub, "hub_404");
  expect_error([&] { hub::pull(ref_of("strata-test/no-such-model"), o); }, ErrorKind::kNotFound,
               {"repository strata-test/no-such-model not found", "HTTP 404"});
  expect_error([&] { hub::pull(ref_of(std::string(kModel) + "@no-such-branch"), o); },
               ErrorKind::kNotFound,
               {"revision 'no-such-branch' not found in strata-test/tiny-model"});
  EXPECT_FALSE(fs::exists(o.cache_dir / "models--strata-test--no-such-model"));
}

TEST(HubPull, RetriesTooManyRequestsAndServerErrorsThenSucceeds) {
  MockHub hub(fixture_repos());
  const hub::HubOptions o = mock_options(hub, "hub_retries");
  hub.fail_next("/api/models/strata-test/tiny-model/revision/main", 429, 2, "1");
  hub.fail_next("/resolve/" + fixture_repo(kModel).commit + "/config.json", 500, 2);
  const std::string blob =
      "/lfs-blobs/" + sha256_hex(fixture_repo(kModel).find("tokenizer.json")->content);
  hub.fail_next(blob, 503, 1);
  const auto start = std::chrono::steady_clock::now();
  hub::pull(ref_of(kModel), o);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  expect_snapshot(o, fixture_repo(kModel), pull_files(kModel));
  EXPECT_EQ(hub.requests("GET", "/revision/main").size(), 3u);
  EXPECT_EQ(hub.requests("HEAD", "/config.json").size(), 3u);
  EXPECT_EQ(hub.requests("GET", blob).size(), 2u);
  // Retry-After: 1 was honoured only up to backoff_max_s (0.05 s).
  EXPECT_LT(seconds, 1.0);
}

TEST(HubPull, GivesUpAfterTheRetriesWithAClearError) {
  MockHub hub(fixture_repos());
  hub::HubOptions o = mock_options(hub, "hub_give_up");
  o.max_retries = 2;
  hub.fail_next("/revision/main", 500, 100);
  expect_error([&] { hub::pull(ref_of(kModel), o); }, ErrorKind::kIo,
               {"HTTP 500", "after 2 retries"});
  EXPECT_EQ(hub.requests("GET", "/revision/main").size(), 3u);
  MockHub limited(fixture_repos());
  limited.fail_next("/revision/main", 429, 100);
  o.endpoint = limited.endpoint();
  expect_error([&] { hub::pull(ref_of(kModel), o); }, ErrorKind::kIo,
               {"HTTP 429", "try again later"});
  EXPECT_EQ(limited.requests("GET", "/revision/main").size(), 3u);
}

TEST(HubPull, ResumesADroppedDownloadWithARange) {
  MockHub hub(fixture_repos());
  const hub::HubOptions o = mock_options(hub, "hub_resume");
  const FakeRepo repo = fixture_repo(kModel);
  const std::string shard = "model-00001-of-00002.safetensors";
  hub.drop_after(shard, 25);
  hub::pull(ref_of(kModel), o);
  expect_snapshot(o, repo, pull_files(kModel));
  const auto gets = hub.requests("GET", "/lfs-blobs/" + sha256_hex(repo.find(shard)->content));
  ASSERT_EQ(gets.size(), 2u);
  EXPECT_EQ(gets[0].range, "");
  EXPECT_EQ(gets[1].range, "bytes=25-");
}

TEST(HubPull, ResumesAnIncompleteBlobAnEarlierRunLeft) {
  MockHub hub(fixture_repos());
  const hub::HubOptions o = mock_options(hub, "hub_resume_earlier");
  const FakeRepo repo = fixture_repo(kModel);
  const std::string content = repo.find("model-00002-of-00002.safetensors")->content;
  const hub::RepoCache cache(o.cache_dir, kModel);
  fs::create_directories(cache.folder() / "blobs");
  write_bytes(cache.incomplete(sha256_hex(content)).string(), content.substr(0, 7));
  hub::pull(ref_of(kModel), o);
  expect_snapshot(o, repo, pull_files(kModel));
  const auto gets = hub.requests("GET", "/lfs-blobs/" + sha256_hex(content));
  ASSERT_EQ(gets.size(), 1u);
  EXPECT_EQ(gets[0].range, "bytes=7-");
}

TEST(HubPull, ChecksumMismatchIsRefusedWithNoPartialFileUnderAFinalName) {
  MockHub hub(fixture_repos());
  const hub::HubOptions o = mock_options(hub, "hub_checksum");
  const FakeRepo repo = fixture_repo(kModel);
  const std::string shard = "model-00002-of-00002.safetensors";
  hub.corrupt(shard);
  expect_error([&] { hub::pull(ref_of(kModel), o); }, ErrorKind::kIo,
               {"checksum mismatch", shard, "refused and removed"});
  const hub::RepoCache cache(o.cache_dir, kModel);
  const std::string sha = sha256_hex(repo.find(shard)->content);
  EXPECT_FALSE(fs::exists(cache.blob(sha)));
  EXPECT_FALSE(fs::exists(cache.incomplete(sha)));
  EXPECT_FALSE(fs::exists(fs::symlink_status(cache.pointer(repo.commit, shard))));
  EXPECT_FALSE(fs::exists(cache.folder() / "refs" / "main"));
  // Without the fault the next pull completes it.
  MockHub good(fixture_repos());
  hub::HubOptions again = o;
  again.endpoint = good.endpoint();
  hub::pull(ref_of(kModel), again);
  expect_snapshot(o, repo, pull_files(kModel));
}

TEST(HubPull, OfflineServesTheCacheWithoutARequest) {
  hub::HubOptions o;
  {
    MockHub hub(fixture_repos());
    o = mock_options(hub, "hub_offline");
    hub::pull(ref_of(kModel), o);
    hub::pull(ref_of(std::string(kGguf) + ":Q8_0"), o);
  }
  o.offline = true;
  o.endpoint = "http://127.0.0.1:9";  // nothing listens there; nothing may be asked
  const hub::PullResult r = hub::pull(ref_of(kModel), o);
  EXPECT_TRUE(r.from_cache);
  EXPECT_EQ(r.model_path, o.cache_dir / "models--strata-test--tiny-model" / "snapshots" /
                              fixture_repo(kModel).commit);
  std::vector<std::string> files = r.files;
  std::ranges::sort(files);
  EXPECT_EQ(files, pull_files(kModel));
  const hub::PullResult gguf = hub::pull(ref_of(std::string(kGguf) + ":q8_0"), o);
  EXPECT_EQ(gguf.model_path.filename(), "tiny-Q8_0.gguf");
  EXPECT_EQ(gguf.format, hub::WeightsFormat::kGguf);
  // What the cache lacks is a clear error.
  expect_error([&] { hub::pull(ref_of(std::string(kGguf) + ":Q4_K_M"), o); }, ErrorKind::kNotFound,
               {"HF_HUB_OFFLINE", "incomplete", "Q4_K_M"});
  expect_error([&] { hub::pull(ref_of(std::string(kModel) + "@v1.0"), o); }, ErrorKind::kNotFound,
               {"HF_HUB_OFFLINE", "not its revision 'v1.0'"});
}

TEST(HubPull, OfflineWithAnEmptyCacheSaysSo) {
  hub::HubOptions o;
  o.cache_dir = fs::path(scratch_dir("hub_offline_empty")) / "hub";
  o.offline = true;
  o.endpoint = "http://127.0.0.1:9";
  expect_error([&] { hub::pull(ref_of(kModel), o); }, ErrorKind::kNotFound,
               {"HF_HUB_OFFLINE is set", "strata-test/tiny-model is not in the hub cache",
                "strata pull strata-test/tiny-model"});
}

TEST(HubPull, AnUnreachableHubFallsBackToTheCache) {
  hub::HubOptions o;
  {
    MockHub hub(fixture_repos());
    o = mock_options(hub, "hub_unreachable");
    hub::pull(ref_of(kModel), o);
  }
  o.endpoint = "http://127.0.0.1:9";
  const hub::PullResult r = hub::pull(ref_of(kModel), o);
  EXPECT_TRUE(r.from_cache);
  EXPECT_EQ(r.commit, fixture_repo(kModel).commit);
  expect_error([&] { hub::pull(ref_of(kGguf), o); }, ErrorKind::kIo,
               {"cannot reach http://127.0.0.1:9", "not in the hub cache"});
}

// A tree as huggingface_hub lays it out (blobs by etag, relative links, refs/main) is used as is.
TEST(HubPull, FindsWhatHuggingfaceHubFetched) {
  MockHub hub(fixture_repos());
  const hub::HubOptions o = mock_options(hub, "hub_hf_tree");
  const FakeRepo repo = fixture_repo(kModel);
  const hub::RepoCache cache(o.cache_dir, kModel);
  fs::create_directories(cache.folder() / "blobs");
  for (const FakeFile& f : repo.files) {  // a full snapshot_download, README and all
    const std::string etag = f.lfs ? sha256_hex(f.content) : git_blob_id(f.content);
    write_bytes(cache.blob(etag).string(), f.content);
    cache.link(repo.commit, f.path, etag);
  }
  fs::create_directories(cache.folder() / "refs");
  write_bytes((cache.folder() / "refs" / "main").string(), repo.commit);

  const hub::PullResult r = hub::pull(ref_of(kModel), o);
  EXPECT_EQ(r.bytes_downloaded, 0u);
  EXPECT_EQ(hub.requests().size(), 1u);  // the repo info only
  hub::HubOptions offline = o;
  offline.offline = true;
  EXPECT_EQ(hub::pull(ref_of(kModel), offline).model_path, r.model_path);
}

TEST(HubPull, GgufQuantTagPicksOneFile) {
  MockHub hub(fixture_repos());
  const hub::HubOptions o = mock_options(hub, "hub_gguf");
  const FakeRepo repo = fixture_repo(kGguf);
  const hub::PullResult r = hub::pull(ref_of(std::string(kGguf) + ":q4_k_m"), o);
  EXPECT_EQ(r.format, hub::WeightsFormat::kGguf);
  EXPECT_EQ(r.model_path, r.snapshot / "tiny-Q4_K_M.gguf");
  expect_snapshot(o, repo, {"tiny-Q4_K_M.gguf"});
  // A file in a folder: its link climbs one folder more.
  const hub::PullResult bf16 = hub::pull(ref_of(std::string(kGguf) + ":BF16"), o);
  EXPECT_EQ(bf16.model_path, r.snapshot / "BF16" / "tiny-BF16.gguf");
  expect_snapshot(o, repo, {"BF16/tiny-BF16.gguf", "tiny-Q4_K_M.gguf"});
  // An explicit file name.
  hub::pull(ref_of(std::string(kGguf) + ":tiny-Q8_0.gguf"), o);
  expect_snapshot(o, repo, {"BF16/tiny-BF16.gguf", "tiny-Q4_K_M.gguf", "tiny-Q8_0.gguf"});
}

TEST(HubPull, GgufSelectionErrorsListTheChoices) {
  MockHub hub(fixture_repos());
  const hub::HubOptions o = mock_options(hub, "hub_gguf_errors");
  expect_error([&] { hub::pull(ref_of(kGguf), o); }, ErrorKind::kInvalidInput,
               {"has 4 GGUF files", "strata-test/tiny-gguf:QUANT", "tiny-Q4_K_M.gguf",
                "tiny-Q8_0.gguf", "BF16/tiny-BF16.gguf"});
  expect_error([&] { hub::pull(ref_of(std::string(kGguf) + ":Q4_K"), o); },
               ErrorKind::kInvalidInput,
               {"'Q4_K' matches 2 GGUF files", "tiny-Q4_K_M.gguf", "tiny-Q4_K_S.gguf"});
  expect_error([&] { hub::pull(ref_of(std::string(kGguf) + ":Q2_K"), o); }, ErrorKind::kNotFound,
               {"no GGUF file of strata-test/tiny-gguf matches 'Q2_K'", "tiny-Q8_0.gguf"});
  EXPECT_TRUE(hub.requests("HEAD", "/resolve/").empty());
}

}  // namespace
}  // namespace strata::test
