// strata pull / ls / rm: fetching a model from the Hugging Face hub into its cache, listing the
// models there (and in given directories), removing a repository from it.
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/human_bytes.h"
#include "cli/model_loading.h"
#include "cli/progress_bar.h"
#include "core/error.h"
#include "core/json.h"
#include "hub/cache.h"
#include "hub/local_model.h"
#include "hub/pull.h"
#include "hub/reference.h"

namespace strata::cli {

namespace {

namespace fs = std::filesystem;

// One model that `ls` shows.
struct Row {
  std::string name;      // a reference that loads it: org/name[:file], or a path
  std::string revision;  // the refs naming its commit ("main", "v1.0"); "" outside the cache
  std::string commit;
  hub::ModelSummary summary;
};

std::vector<Row> cache_rows(const fs::path& cache_dir) {
  std::vector<Row> rows;
  for (const hub::CachedRepo& repo : hub::scan_cache(cache_dir)) {
    for (const hub::CachedSnapshot& snap : repo.snapshots) {
      std::string revision;
      for (const std::string& r : snap.refs) revision += (revision.empty() ? "" : ",") + r;
      for (hub::ModelSummary& m : hub::describe_models(snap.path, /*recurse=*/true)) {
        std::string name = repo.repo;
        if (m.format == "GGUF") {
          name += ':';
          name += m.path.lexically_relative(snap.path).generic_string();
        }
        rows.push_back({name, revision.empty() ? "-" : revision, snap.commit, std::move(m)});
      }
    }
  }
  return rows;
}

std::vector<Row> dir_rows(const std::string& dir) {
  std::error_code ec;
  check(fs::exists(dir, ec), ErrorKind::kNotFound, "{} does not exist", dir);
  std::vector<fs::path> models;
  if (hub::is_model_path(dir)) {
    models.push_back(dir);
  } else {
    check(fs::is_directory(dir, ec), ErrorKind::kInvalidInput,
          "{} is neither a model (a checkpoint directory or a .gguf file) nor a folder of models",
          dir);
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
      if (hub::is_model_path(e.path())) models.push_back(e.path());
    std::ranges::sort(models);
  }
  std::vector<Row> rows;
  for (const fs::path& p : models)
    for (hub::ModelSummary& m : hub::describe_models(p, /*recurse=*/false))
      rows.push_back({m.path.string(), "", "", std::move(m)});
  return rows;
}

void print_table(const std::vector<Row>& rows) {
  size_t name = 4, revision = 8, format = 6;
  for (const Row& r : rows) {
    name = std::max(name, r.name.size());
    revision = std::max(revision, r.revision.size());
    format = std::max(format, r.summary.format.size());
  }
  fmt::print("{:<{}}  {:<{}}  {:<8}  {:>10}  {:<{}}  {}\n", "NAME", name, "REVISION", revision,
             "COMMIT", "SIZE", "FORMAT", format, "FAMILY");
  for (const Row& r : rows)
    fmt::print("{:<{}}  {:<{}}  {:<8}  {:>10}  {:<{}}  {}\n", r.name, name,
               r.revision.empty() ? "-" : r.revision, revision,
               r.commit.empty() ? "-" : r.commit.substr(0, 8), human_bytes(r.summary.bytes),
               r.summary.format, format, r.summary.family);
}

}  // namespace

int run_pull(const PullArgs& args) {
  const hub::Reference ref = hub::parse_reference(args.ref);
  check(ref.kind == hub::Reference::Kind::kRepo, ErrorKind::kInvalidInput,
        "strata pull takes a Hugging Face repository, org/name[@revision][:file-or-quant]; '{}' is "
        "{}",
        args.ref,
        std::filesystem::exists(args.ref) ? "a local path, which needs no pull" : "not one");
  const hub::HubOptions options = hub_options();
  hub::PullResult r;
  {
    ProgressBar bar(/*lines=*/true);
    r = hub::pull(ref.repo, options, bar.callback());
  }
  uint64_t bytes = 0;
  for (const std::string& f : r.files) {
    std::error_code ec;
    const uint64_t n = fs::file_size(r.snapshot / f, ec);
    bytes += ec ? 0 : n;
  }
  std::fprintf(
      stderr, "%s at commit %.8s: %zu file%s, %s (%s downloaded%s)\n", ref.repo.to_string().c_str(),
      r.commit.c_str(), r.files.size(), r.files.size() == 1 ? "" : "s", human_bytes(bytes).c_str(),
      human_bytes(r.bytes_downloaded).c_str(), r.from_cache ? "; the hub was not asked" : "");
  std::printf("%s\n", r.model_path.c_str());
  return 0;
}

int run_ls(const LsArgs& args) {
  const hub::HubOptions options = hub_options();
  std::vector<Row> rows = cache_rows(options.cache_dir);
  for (const std::string& dir : args.dirs) {
    std::vector<Row> more = dir_rows(dir);
    rows.insert(rows.end(), more.begin(), more.end());
  }
  if (args.json) {
    Json models = Json::array();
    for (const Row& r : rows)
      models.push_back({{"name", r.name},
                        {"source", r.commit.empty() ? "directory" : "hub"},
                        {"revision", r.revision.empty() ? Json() : Json(r.revision)},
                        {"commit", r.commit.empty() ? Json() : Json(r.commit)},
                        {"path", r.summary.path.string()},
                        {"bytes", r.summary.bytes},
                        {"format", r.summary.format},
                        {"family", r.summary.family}});
    std::cout << Json{{"cache", options.cache_dir.string()}, {"models", models}}.dump(2) << "\n";
    return 0;
  }
  if (rows.empty()) {
    fmt::print("no models in the hub cache {}\n", options.cache_dir.string());
    return 0;
  }
  print_table(rows);
  return 0;
}

int run_rm(const RmArgs& args) {
  const std::optional<hub::RepoRef> ref = hub::parse_repo_ref(args.ref);
  check(ref.has_value(), ErrorKind::kInvalidInput,
        "strata rm takes a repository of the hub cache, org/name (strata ls lists them); '{}' is "
        "not one",
        args.ref);
  check(ref->selector.empty() && args.ref.find('@') == std::string::npos, ErrorKind::kInvalidInput,
        "strata rm removes a whole repository from the cache: give {} without @revision or :file",
        ref->repo);
  const hub::HubOptions options = hub_options();
  const uint64_t bytes = hub::remove_repo(options.cache_dir, ref->repo);
  fmt::print("removed {} ({}) from {}\n", ref->repo, human_bytes(bytes),
             options.cache_dir.string());
  return 0;
}

}  // namespace strata::cli
