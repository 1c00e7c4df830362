// The strata binary: parses the command line and runs a subcommand. Errors become one clear line
// on stderr and a non-zero exit code (1: the request failed; 2: bad usage).
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"

int main(int argc, char** argv) {
  using namespace strata::cli;
  CLI::App app{"strata: LLM inference engine and OpenAI-compatible server"};
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "debug, info, warn, error or off");

  GenerateArgs gen;
  auto* generate = app.add_subcommand("generate", "Generate text from a prompt");
  generate->add_option("--model,-m", gen.model, "Model directory or .gguf file")->required();
  generate->add_option("--prompt,-p", gen.prompt, "Prompt text (empty: start from BOS)");
  generate->add_option("--max-tokens,-n", gen.max_tokens, "Tokens to generate")->check(CLI::NonNegativeNumber);
  generate->add_option("--temperature,-t", gen.temperature, "0 for greedy")->check(CLI::NonNegativeNumber);
  generate->add_option("--top-p", gen.top_p)->check(CLI::Range(0.0, 1.0));
  generate->add_option("--top-k", gen.top_k)->check(CLI::NonNegativeNumber);
  generate->add_option("--min-p", gen.min_p)->check(CLI::Range(0.0, 1.0));
  generate->add_option("--repetition-penalty", gen.repetition_penalty)->check(CLI::PositiveNumber);
  generate->add_option("--seed,-s", gen.seed);
  generate->add_option("--quantize", gen.quantize, "Quantize on load: q4 or q8 (MLX affine, group 64)")
      ->check(CLI::IsMember({"q4", "q8", "none"}));
  generate->add_option("--ctx-size,-c", gen.ctx_size)->check(CLI::PositiveNumber);
  generate->add_flag("--json", gen.json, "Print one JSON object instead of streaming text");
  generate->add_flag("--ignore-eos", gen.ignore_eos, "Do not stop at end-of-sequence tokens");

  InfoArgs info;
  auto* info_cmd = app.add_subcommand("info", "Describe a model");
  info_cmd->add_option("--model,-m", info.model)->required();
  info_cmd->add_option("--quantize", info.quantize)->check(CLI::IsMember({"q4", "q8", "none"}));
  info_cmd->add_option("--ctx-size,-c", info.ctx_size)->check(CLI::PositiveNumber);
  info_cmd->add_flag("--json", info.json);

  TokenizeArgs tok;
  auto* tokenize = app.add_subcommand("tokenize", "Text to token ids, or ids to text with --decode");
  tokenize->add_option("--tokenizer,--model", tok.tokenizer, "Model directory, tokenizer.json or .gguf")->required();
  tokenize->add_option("--text", tok.text);
  tokenize->add_option("--file", tok.file);
  tokenize->add_option("--decode", tok.decode, "Token ids to decode, e.g. \"1,2,3\"");
  tokenize->add_flag("--add-special", tok.add_special, "Apply the post-processor (BOS)");
  tokenize->add_flag("--json", tok.json);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    strata::log::set_level(log_level);
    if (*generate) return run_generate(gen);
    if (*info_cmd) return run_info(info);
    if (*tokenize) return run_tokenize(tok);
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 2;
}
