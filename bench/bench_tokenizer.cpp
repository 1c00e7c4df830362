// Tokenizer throughput: encode MB/s on one thread for English prose (the licence texts in
// /usr/share/common-licenses) and C++ code (libstdc++ headers), with the Qwen tokenizer and any
// other tokenizer.json named on the command line. Prints one markdown table; asserts nothing.
//
// Usage: bench_tokenizer [--seconds S] [TOKENIZER_PATH ...]
//   default tokenizer: $STRATA_SHARED_FIXTURES/tokenizers/qwen35 (or ../shared/fixtures/...)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "text/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Regular files under `dir` whose name passes `keep`, concatenated in name order up to `limit`.
template <typename Keep>
std::string gather(const fs::path& dir, Keep keep, size_t limit) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec) && keep(it->path())) {
      files.push_back(it->path());
    }
  }
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& f : files) {
    if (text.size() >= limit) break;
    text += read_all(f);
    text += '\n';
  }
  if (text.size() > limit) text.resize(limit);
  // Cut back to a character boundary.
  while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
  if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) text.pop_back();
  return text;
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

struct Result {
  double cold_mb_s;  // first encode by a freshly loaded tokenizer (empty word cache)
  double warm_mb_s;  // best of the repeats after that
  double tokens_per_byte;
};

Result measure(const std::string& tokenizer_path, const std::string& text, double seconds) {
  const auto tok = strata::text::Tokenizer::load(tokenizer_path);
  const double mb = static_cast<double>(text.size()) / 1e6;
  auto t0 = Clock::now();
  const auto ids = tok->encode(text);
  const double cold = std::chrono::duration<double>(Clock::now() - t0).count();
  double best = cold;
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  for (int i = 0; i < 3 || Clock::now() < until; ++i) {
    t0 = Clock::now();
    const auto again = tok->encode(text);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    if (again.size() != ids.size()) std::fprintf(stderr, "warning: encode is not repeatable\n");
  }
  return {mb / cold, mb / best, static_cast<double>(ids.size()) / static_cast<double>(text.size())};
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 2.0;
  std::vector<std::string> tokenizers;
  std::string command = argv[0];
  for (int i = 1; i < argc; ++i) {
    command += ' ';
    command += argv[i];
    const std::string arg = argv[i];
    if (arg == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
      command += ' ';
      command += argv[i];
    } else {
      tokenizers.push_back(arg);
    }
  }
  if (tokenizers.empty()) {
    const char* env = std::getenv("STRATA_SHARED_FIXTURES");
    tokenizers.push_back(std::string(env ? env : "../shared/fixtures") + "/tokenizers/qwen35");
  }

  const std::string prose = gather(
      "/usr/share/common-licenses", [](const fs::path&) { return true; }, 4 << 20);
  const std::string code = gather(
      "/usr/include/c++", [](const fs::path& p) { return p.extension() == ".h"; }, 4 << 20);
  if (prose.empty() || code.empty()) {
    std::fprintf(stderr, "no input text found (/usr/share/common-licenses, /usr/include/c++)\n");
    return 1;
  }

  std::printf("## Tokenizer encode throughput (one thread)\n\n");
  std::printf("command: `%s`  \nmachine: %s, %u hardware threads  \n", command.c_str(),
              cpu_name().c_str(), std::thread::hardware_concurrency());
  std::printf(
      "inputs: prose = /usr/share/common-licenses/* (%.2f MB), code = /usr/include/c++/**/*.h "
      "(%.2f MB)\n\n",
      prose.size() / 1e6, code.size() / 1e6);
  std::printf("| tokenizer | input | cold MB/s | warm MB/s | tokens/byte |\n");
  std::printf("|---|---|---:|---:|---:|\n");
  for (const std::string& path : tokenizers) {
    try {
      for (const auto& [name, text] :
           {std::pair<const char*, const std::string&>{"prose", prose}, {"code", code}}) {
        const Result r = measure(path, text, seconds);
        std::printf("| %s | %s | %.1f | %.1f | %.3f |\n", fs::path(path).filename().c_str(), name,
                    r.cold_mb_s, r.warm_mb_s, r.tokens_per_byte);
        std::fflush(stdout);
      }
    } catch (const strata::Error& e) {
      std::fprintf(stderr, "%s: %s\n", path.c_str(), e.what());
      return 1;
    }
  }
  std::printf("\ncold: the first encode after loading (empty word cache); warm: best repeat.\n");
  return 0;
}
