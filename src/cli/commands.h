// The strata subcommands. main.cpp parses the command line (CLI11 stays in that one file) and
// calls these; each returns the process exit code and throws strata::Error on failure.
#pragma once

#include <optional>
#include <string>

namespace strata::cli {

struct GenerateArgs {
  std::string model;
  std::string prompt;
  int64_t max_tokens = 256;
  float temperature = 0.8f;
  float top_p = 0.95f;
  int top_k = 0;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  uint64_t seed = 0;
  std::string quantize;  // "", "q4", "q8"
  int64_t ctx_size = 4096;
  bool json = false;
  bool ignore_eos = false;
};
int run_generate(const GenerateArgs& args);

struct InfoArgs {
  std::string model;
  std::string quantize;
  int64_t ctx_size = 4096;
  bool json = false;
};
int run_info(const InfoArgs& args);

struct TokenizeArgs {
  std::string tokenizer;
  std::optional<std::string> text;
  std::optional<std::string> file;
  std::optional<std::string> decode;  // ids, separated by commas and/or spaces
  bool add_special = false;
  bool json = false;
};
int run_tokenize(const TokenizeArgs& args);

}  // namespace strata::cli
