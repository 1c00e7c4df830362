// Runs the strata binary for the CLI tests: exit code, stdout, and stderr (merged into stdout, or
// kept apart).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "core/mmap.h"
#include "test_util.h"

namespace strata::test {

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout (and stderr when merged)
  std::string err;  // stderr when kept apart
};

// args: the command line after `strata` (shell syntax); env: "NAME=value " assignments for it.
inline CliResult strata_cli(const std::string& args, bool merge_stderr = true, const std::string& env = "") {
  // One folder per test process: ctest runs several at once.
  const std::string err_path = scratch_dir("cli_stderr_" + std::to_string(::getpid())) + "/err.txt";
  const std::string cmd = env + std::string(STRATA_BINARY_DIR) + "/strata " + args +
                          (merge_stderr ? " 2>&1" : " 2>" + err_path);
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (!merge_stderr) r.err = read_file(err_path);
  return r;
}

}  // namespace strata::test
