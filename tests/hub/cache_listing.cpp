// The cache listing compared against huggingface_hub's (tools/hub_listing.py writes the same).
#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "hub_test_util.h"

namespace strata::test {

namespace fs = std::filesystem;

std::string cache_listing(const fs::path& cache_dir) {
  std::vector<std::pair<std::string, std::string>> lines;  // path, line
  std::vector<fs::path> repos;
  for (const fs::directory_entry& e : fs::directory_iterator(cache_dir))
    if (e.path().filename().string().starts_with("models--") && e.is_directory())
      repos.push_back(e.path());
  for (const fs::path& repo : repos) {
    for (const char* part : {"blobs", "refs", "snapshots"}) {
      const fs::path top = repo / part;
      if (!fs::is_directory(fs::symlink_status(top))) continue;
      const auto rel = [&](const fs::path& p) {
        return p.lexically_relative(cache_dir).generic_string();
      };
      lines.emplace_back(rel(top), rel(top) + "/");
      for (const fs::directory_entry& e : fs::recursive_directory_iterator(top)) {
        const std::string path = rel(e.path());
        if (e.is_symlink()) {
          lines.emplace_back(path, path + " -> " + fs::read_symlink(e.path()).string());
        } else if (e.is_directory()) {
          lines.emplace_back(path, path + "/");
        } else {
          std::string line = path + " " + std::to_string(e.file_size());
          if (part == std::string("refs")) {
            std::ifstream in(e.path());
            std::stringstream s;
            s << in.rdbuf();
            line += ' ';
            line += s.str();
          }
          lines.emplace_back(path, line);
        }
      }
    }
  }
  std::ranges::sort(lines);
  std::string out;
  for (const auto& [path, line] : lines) out += line + "\n";
  return out;
}

}  // namespace strata::test
