// A loopback mock of the Hugging Face hub for the hub tests: an HTTP server on 127.0.0.1 (an
// ephemeral port) serving fake repositories through the hub's routes and headers:
//   GET  /api/models/{org}/{name}/revision/{revision}   {"id", "sha", "siblings": [{"rfilename"}]}
//   HEAD/GET /{org}/{name}/resolve/{revision}/{path}    a plain file: 200, ETag "<git blob id>";
//                                                       an LFS file: 302 to /lfs-blobs/{sha256},
//                                                       X-Linked-Etag "<sha256>", X-Linked-Size;
//                                                       X-Repo-Commit on both
//   HEAD/GET /lfs-blobs/{sha256}                        the bytes, with Range support (206)
// and the hub's errors (404 with X-Error-Code RepoNotFound / RevisionNotFound / EntryNotFound, 401
// and 403 GatedRepo). Knobs make it fail on purpose: statuses, a connection cut mid-file, a body
// that does not match its checksum. Every request is recorded.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace strata::test {

struct FakeFile {
  std::string path;
  std::string content;
  bool lfs = false;
};

struct FakeRepo {
  std::string id;
  std::string commit;
  std::vector<std::string> revisions;  // names that resolve to `commit` (the commit always does)
  std::vector<FakeFile> files;
  const FakeFile* find(const std::string& path) const;
};

struct FakePull {
  std::string ref;
  std::string repo;
  std::string revision;
  std::vector<std::string> files;
};

// tests/fixtures/hub/fake_hub.json, which tools/hub_listing.py serves too.
std::vector<FakeRepo> fixture_repos();
std::vector<FakePull> fixture_pulls();

// A repository of a directory's files (each *.safetensors and tokenizer.json as LFS files).
FakeRepo repo_from_dir(const std::string& id, const std::string& commit, const std::string& dir);

std::string sha256_hex(const std::string& data);
std::string git_blob_id(const std::string& data);  // sha1 of "blob <size>\0<data>"

struct RecordedRequest {
  std::string method;
  std::string target;  // path and query, as sent
  std::string range;   // the Range header; "" when none
  std::string authorization;
};

class MockHub {
 public:
  explicit MockHub(std::vector<FakeRepo> repos);
  ~MockHub();
  MockHub(const MockHub&) = delete;
  MockHub& operator=(const MockHub&) = delete;

  std::string endpoint() const;  // http://127.0.0.1:PORT

  // The repository's files need "Authorization: Bearer <token>": 401 without a token, 403 with
  // another (its repo info stays public, as the hub's does).
  void gate(const std::string& repo, const std::string& token);
  // The next `times` requests whose target contains `needle` are answered `status` (with
  // Retry-After when given).
  void fail_next(const std::string& needle, int status, int times,
                 const std::string& retry_after = "");
  // The next body sent of the file `path` stops after `bytes` bytes and the connection closes.
  void drop_after(const std::string& path, size_t bytes);
  // Every body of the file `path` is sent with its first byte changed.
  void corrupt(const std::string& path);

  std::vector<RecordedRequest> requests() const;
  void clear_requests();
  // The recorded requests of `method` whose target contains `needle`.
  std::vector<RecordedRequest> requests(const std::string& method, const std::string& needle) const;

 private:
  struct Failure {
    std::string needle;
    int status;
    int times;
    std::string retry_after;
  };
  void serve();
  void handle(int fd);

  std::vector<FakeRepo> repos_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  mutable std::mutex mutex_;
  std::vector<std::thread> connections_;
  std::vector<RecordedRequest> requests_;
  std::map<std::string, std::string> gates_;
  std::vector<Failure> failures_;
  std::map<std::string, size_t> drops_;
  std::vector<std::string> corrupt_;
};

}  // namespace strata::test
