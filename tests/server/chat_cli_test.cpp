// strata chat end to end with stories260K: answers each line, keeps the conversation across turns
// (the second prompt is longer), forgets it on /reset, and ends on /exit.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>

#include "test_util.h"

namespace strata {
namespace {

std::string run_chat(const std::string& input, const std::string& args = "") {
  const std::string in_path = test::scratch_dir("chat_cli") + "/input.txt";
  test::write_bytes(in_path, input);
  const std::string cmd = "OMP_NUM_THREADS=1 " + std::string(STRATA_BINARY_DIR) +
                          "/strata chat -m " +
                          test::shared_fixture("models/stories260K/stories260K.gguf") +
                          " --temperature 0 -n 12 " + args + " < " + in_path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << out;
  return out;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = 0; (pos = text.find(what, pos)) != std::string::npos; pos += what.size()) ++n;
  return n;
}

TEST(ChatCli, AnswersEachTurnAndResetsOnRequest) {
  const std::string out =
      run_chat("Once upon a time\nThen what?\n/reset\nOnce upon a time\n/exit\nnever read\n");
  EXPECT_EQ(count(out, "> "), 5u) << out;  // four lines read, then the prompt /exit answers
  EXPECT_NE(out.find("(conversation cleared)"), std::string::npos) << out;
  // Greedy: the first and the post-reset answers to the same line are the same text.
  const size_t first = out.find("> ") + 2;
  const std::string answer1 = out.substr(first, out.find("\n> ", first) - first);
  const size_t after_reset = out.find("(conversation cleared)\n> ") + 25;
  const std::string answer3 = out.substr(after_reset, out.find("\n> ", after_reset) - after_reset);
  EXPECT_FALSE(answer1.empty());
  EXPECT_EQ(answer1, answer3) << out;
}

TEST(ChatCli, MissingModelIsAClearError) {
  const std::string cmd =
      std::string(STRATA_BINARY_DIR) + "/strata chat -m /nonexistent < /dev/null 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[1024];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(out.find("/nonexistent"), std::string::npos) << out;
}

}  // namespace
}  // namespace strata
