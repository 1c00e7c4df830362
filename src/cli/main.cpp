// The strata binary: parses the command line and runs a subcommand. Errors become one clear line
// on stderr and a non-zero exit code (1: the request failed; 2: bad usage).
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli/commands.h"
#include "cli/model_loading.h"
#include "core/error.h"
#include "core/log.h"

namespace {
// --device and --kv-cache-type, shared by the commands that load a model.
void add_placement_options(CLI::App& cmd, std::string& device, std::string& kv_cache_type) {
  cmd.add_option("--device", device, "Where to run: cuda, cpu or auto (the GPU when there is one)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd.add_option(
         "--kv-cache-type", kv_cache_type,
         "KV cache element type: auto (bf16 where the checkpoint is 16-bit or MLX-quantized, f32 "
         "for an f32 one), f32 or bf16")
      ->check(CLI::IsMember({"auto", "f32", "bf16"}));
}
}  // namespace

int main(int argc, char** argv) {
  using namespace strata::cli;
  CLI::App app{"strata: LLM inference engine and OpenAI-compatible server"};
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "debug, info, warn, error or off");

  GenerateArgs gen;
  auto* generate = app.add_subcommand("generate", "Generate text from a prompt");
  generate->add_option("--model,-m", gen.model, "Model directory or .gguf file (default: the built-in strata-demo)");
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
  add_placement_options(*generate, gen.device, gen.kv_cache_type);
  generate->add_option("--ctx-size,-c", gen.ctx_size)->check(CLI::PositiveNumber);
  generate->add_flag("--json", gen.json, "Print one JSON object instead of streaming text");
  generate->add_flag("--ignore-eos", gen.ignore_eos, "Do not stop at end-of-sequence tokens");

  InfoArgs info;
  auto* info_cmd = app.add_subcommand("info", "Describe a model");
  info_cmd->add_option("--model,-m", info.model, "Model directory or .gguf file (default: the built-in strata-demo)");
  info_cmd->add_option("--quantize", info.quantize)->check(CLI::IsMember({"q4", "q8", "none"}));
  add_placement_options(*info_cmd, info.device, info.kv_cache_type);
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

  ServeArgs serve;
  auto* serve_cmd = app.add_subcommand("serve", "Serve the OpenAI-compatible HTTP API");
  serve_cmd->add_option("--model,-m", serve.model, "Model directory or .gguf file (default: the built-in strata-demo)");
  serve_cmd->add_option("--host", serve.host, "Address to listen on (default 127.0.0.1: this machine only)");
  serve_cmd->add_option("--port", serve.port, "Port (0: any free port)")->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--api-key", serve.api_key, "Require 'Authorization: Bearer KEY'");
  serve_cmd->add_option("--ctx-size,-c", serve.ctx_size, "Context size in tokens (default: the model's, at most 4096)")
      ->check(CLI::PositiveNumber);
  serve_cmd->add_option("--chat-template", serve.chat_template, "Chat template file (.jinja or .json) to use instead of the model's");
  serve_cmd->add_option("--parallel", serve.parallel, "Requests generating at once, each with its own state slot of --ctx-size (default: as many as --state-budget holds, at most 64)")
      ->check(CLI::NonNegativeNumber);
  serve_cmd->add_option("--state-budget", serve.state_budget_mib, "MiB of memory for sequence state (KV cache and recurrent state) when --parallel is not given (default: half the GPU's free memory after loading, 1024 on the CPU)")
      ->check(CLI::NonNegativeNumber);
  serve_cmd->add_option("--max-concurrency", serve.max_concurrency, "Requests admitted at once (generating + queued); more get 503")
      ->check(CLI::Range(1, 4096));
  serve_cmd->add_option("--max-body-bytes", serve.max_body_bytes, "Largest request body accepted (413 beyond)")
      ->check(CLI::PositiveNumber);
  serve_cmd->add_option("--max-connections", serve.max_connections, "Connections open at once; at the cap the longest-waiting idle one is closed")
      ->check(CLI::Range(1, 1 << 20));
  serve_cmd->add_option("--max-connections-per-client", serve.max_connections_per_client, "Connections open at once from one client address")
      ->check(CLI::Range(1, 1 << 20));
  serve_cmd->add_option("--header-timeout", serve.header_timeout, "Seconds from a request's first byte to the end of its headers (408 beyond)")
      ->check(CLI::PositiveNumber);
  serve_cmd->add_option("--body-timeout", serve.body_timeout, "Seconds a request's body may take to arrive (408 beyond)")
      ->check(CLI::PositiveNumber);
  serve_cmd->add_option("--keep-alive-timeout", serve.keep_alive_timeout, "Seconds an idle connection may wait for its next request")
      ->check(CLI::PositiveNumber);
  serve_cmd->add_option("--write-timeout", serve.write_timeout, "Seconds a response may wait on a client that reads nothing")
      ->check(CLI::PositiveNumber);
  serve_cmd->add_option("--alias", serve.alias, "A model name clients may use (repeatable; the first is reported)");
  serve_cmd->add_option("--quantize", serve.quantize, "Quantize on load: q4 or q8")->check(CLI::IsMember({"q4", "q8", "none"}));
  add_placement_options(*serve_cmd, serve.device, serve.kv_cache_type);
  serve_cmd->add_option("--shutdown-timeout", serve.shutdown_timeout, "Seconds generations may finish after SIGINT/SIGTERM")
      ->check(CLI::NonNegativeNumber);
  serve_cmd->add_option("--think-config", serve.think_config,
                        "Think control JSON (thinking budget, loop detection, escape hints, router) replacing the built-in configs/think_control.json");

  ChatArgs chat;
  auto* chat_cmd = app.add_subcommand("chat", "Chat with a model in the terminal (/reset, /exit)");
  chat_cmd->add_option("--model,-m", chat.model, "Model directory or .gguf file (default: the built-in strata-demo)");
  chat_cmd->add_option("--chat-template", chat.chat_template, "Chat template file to use instead of the model's");
  chat_cmd->add_option("--system", chat.system, "A system message starting the conversation");
  chat_cmd->add_option("--ctx-size,-c", chat.ctx_size)->check(CLI::PositiveNumber);
  chat_cmd->add_option("--max-tokens,-n", chat.max_tokens, "Longest answer in tokens")->check(CLI::PositiveNumber);
  chat_cmd->add_option("--temperature,-t", chat.temperature, "0 for greedy")->check(CLI::NonNegativeNumber);
  chat_cmd->add_option("--top-p", chat.top_p)->check(CLI::Range(0.0, 1.0));
  chat_cmd->add_option("--top-k", chat.top_k)->check(CLI::NonNegativeNumber);
  chat_cmd->add_option("--min-p", chat.min_p)->check(CLI::Range(0.0, 1.0));
  chat_cmd->add_option("--seed,-s", chat.seed);
  chat_cmd->add_option("--quantize", chat.quantize)->check(CLI::IsMember({"q4", "q8", "none"}));
  add_placement_options(*chat_cmd, chat.device, chat.kv_cache_type);
  chat_cmd->add_flag("--no-thinking", chat.no_thinking, "Ask the template for answers without reasoning (enable_thinking=false)");

  RenderArgs render;
  auto* render_cmd = app.add_subcommand("render", "Print the prompt a chat template makes of a conversation");
  render_cmd->add_option("--model,-m", render.model, "Model directory or .gguf file");
  render_cmd->add_option("--template,--chat-template", render.template_file, "Chat template file (.jinja, or .json with chat_template)");
  render_cmd->add_option("--messages", render.messages, "JSON file (- for stdin): a list of messages, or a request body")->required();
  render_cmd->add_option("--tools", render.tools, "JSON file with the tools list");
  render_cmd->add_option("--kwargs", render.kwargs, "Template variables as a JSON object, e.g. '{\"enable_thinking\": false}'");
  render_cmd->add_flag("--add-generation-prompt", render.add_generation_prompt, "End with the assistant turn's opening");

  BenchArgs bench;
  auto* bench_cmd = app.add_subcommand("bench",
                                       "Benchmark random-weight models of real shapes, built in "
                                       "memory (no download): prints a markdown table");
  bench_cmd
      ->add_option("--shape", bench.shapes,
                   "qwen3.5-9b, qwen3.5-0.8b, qwen3.5-35b-a3b, qwen3-8b or llama-3.1-8b "
                   "(repeatable; default: all)")
      ->delimiter(',');
  bench_cmd
      ->add_option("--bits", bench.bits, "4 or 8: MLX affine, group 64 (repeatable; default: both)")
      ->delimiter(',')
      ->check(CLI::IsMember({4, 8}));
  add_placement_options(*bench_cmd, bench.device, bench.kv_cache_type);
  bench_cmd->add_option("--prompt", bench.prompts, "Prefill lengths in tokens (default 512,4096)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  bench_cmd->add_option("--decode", bench.decode, "Tokens generated per decode run (default 128)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  bench_cmd
      ->add_option("--contexts", bench.contexts,
                   "Prompt lengths before the decode runs (default 512,16384)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  bench_cmd
      ->add_option("--temperature", bench.temperature,
                   "Sample the timed requests at this temperature (seed 1; default 0: greedy)")
      ->check(CLI::Range(0.0f, 100.0f));
  bench_cmd->add_option("--top-p", bench.top_p, "Nucleus for --temperature (default 1: off)")
      ->check(CLI::Range(0.0f, 1.0f));
  bench_cmd->add_option("--presence-penalty", bench.presence_penalty,
                        "Presence penalty of the timed requests (default 0: off)")
      ->check(CLI::Range(-2.0f, 2.0f));
  bench_cmd
      ->add_option("--layers", bench.layers,
                   "Keep only each shape's first N layers (quick checks; not the model's speed)")
      ->check(CLI::PositiveNumber);
  bench_cmd->add_flag("--breakdown,!--no-breakdown", bench.breakdown,
                      "Per-op times of an eager qwen3.5-9b decode step, on CUDA (default on)");
  bench_cmd->add_flag("--quick", bench.quick,
                      "Short runs for a CPU smoke test: prompts 16,64, decode 8, contexts 16,64");
  bench_cmd->add_option("--output,-o", bench.output, "Also write the markdown to this file");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    strata::log::set_level(log_level);
    // generate, info, serve and chat fall back to the built-in model.
    const std::pair<CLI::App*, std::string*> model_options[] = {
        {generate, &gen.model}, {info_cmd, &info.model}, {serve_cmd, &serve.model}, {chat_cmd, &chat.model}};
    for (auto [cmd, model] : model_options)
      if (cmd->parsed() && model->empty()) *model = default_model_path(argc > 0 ? argv[0] : nullptr);
    if (*generate) return run_generate(gen);
    if (*info_cmd) return run_info(info);
    if (*tokenize) return run_tokenize(tok);
    if (*serve_cmd) return run_serve(serve);
    if (*chat_cmd) return run_chat(chat);
    if (*render_cmd) return run_render(render);
    if (*bench_cmd) {
      bench.command_line = "strata";
      for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        bench.command_line +=
            arg.find_first_of(" \t\"'") == std::string::npos ? " " + arg : " '" + arg + "'";
      }
      return run_bench(bench);
    }
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 2;
}
