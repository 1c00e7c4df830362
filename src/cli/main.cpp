// The strata binary: parses the command line and runs a subcommand. Errors become one clear line
// on stderr and a non-zero exit code (1: the request failed; 2: bad usage).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/tuning.h"
#include "cli/commands.h"
#include "cli/model_loading.h"
#include "core/error.h"
#include "core/log.h"
#include "core/settings.h"
#include "hub/reference.h"

namespace {
using strata::SettingMap;

// Adds the flag of the registry's `setting` (core/settings.h), with its help and an enum's values,
// and `alias` (e.g. "-c") to `cmd`. A value given is the setting's command-line value in `flags`,
// which come before the environment and the defaults. T: how CLI11 reads it, so that a flag of
// another type is bad usage (exit code 2) like every other flag's.
template <typename T = std::string>
CLI::Option* add_setting_flag(CLI::App& cmd, SettingMap& flags, std::string_view setting,
                              const std::string& alias = "") {
  const auto specs = strata::setting_specs();
  const auto spec = std::ranges::find(specs, setting, &strata::SettingSpec::name);
  strata::check(spec != specs.end() && !spec->flag.empty(), strata::ErrorKind::kInternal,
                "no setting '{}' has a flag", setting);
  std::string names(spec->flag);
  if (!alias.empty()) names += "," + alias;
  CLI::Option* option = cmd.add_option_function<T>(
      names,
      [&flags, name = std::string(setting)](const T& value) {
        if constexpr (std::is_same_v<T, std::string>) {
          flags[name] = value;
        } else {
          flags[name] = std::to_string(value);
        }
      },
      std::string(spec->help));
  if (spec->type == strata::SettingType::kEnum)
    option->check(
        CLI::IsMember(std::vector<std::string>(spec->choices.begin(), spec->choices.end())));
  return option;
}

// The flag of the registry's boolean `setting`: "--flag" turns it on, "--flag=false" (or 0, off,
// no) off; either counts as the command line's value.
CLI::Option* add_setting_switch(CLI::App& cmd, SettingMap& flags, std::string_view setting) {
  const auto specs = strata::setting_specs();
  const auto spec = std::ranges::find(specs, setting, &strata::SettingSpec::name);
  strata::check(
      spec != specs.end() && !spec->flag.empty() && spec->type == strata::SettingType::kBool,
      strata::ErrorKind::kInternal, "no boolean setting '{}' has a flag", setting);
  return cmd.add_flag_function(
      std::string(spec->flag),
      [&flags, name = std::string(setting)](int64_t count) {
        flags[name] = count > 0 ? "true" : "false";
      },
      std::string(spec->help));
}

// --device and --kv-cache-type, shared by the commands that load a model.
void add_placement_options(CLI::App& cmd, SettingMap& flags) {
  add_setting_flag(cmd, flags, "device");
  add_setting_flag(cmd, flags, "kv_cache_type");
}
}  // namespace

int main(int argc, char** argv) {
  using namespace strata::cli;
  CLI::App app{"strata: LLM inference engine and OpenAI-compatible server"};
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "debug, info, warn, error or off");
  SettingMap setting_flags;  // the settings given on the command line, by setting name

  GenerateArgs gen;
  auto* generate = app.add_subcommand("generate", "Generate text from a prompt");
  add_setting_flag(*generate, setting_flags, "model", "-m");
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
  add_placement_options(*generate, setting_flags);
  add_setting_flag<int64_t>(*generate, setting_flags, "ctx_size", "-c")
      ->check(CLI::PositiveNumber);
  generate->add_flag("--json", gen.json, "Print one JSON object instead of streaming text");
  generate->add_flag("--ignore-eos", gen.ignore_eos, "Do not stop at end-of-sequence tokens");
  add_setting_flag(*generate, setting_flags, "speculative");
  add_setting_flag<int64_t>(*generate, setting_flags, "draft_max")->check(CLI::Range(1, 16));
  add_setting_flag(*generate, setting_flags, "draft_model");
  add_setting_flag<int64_t>(*generate, setting_flags, "self_draft_layers")
      ->check(CLI::NonNegativeNumber);

  InfoArgs info;
  auto* info_cmd = app.add_subcommand("info", "Describe a model");
  add_setting_flag(*info_cmd, setting_flags, "model", "-m");
  info_cmd->add_option("--quantize", info.quantize)->check(CLI::IsMember({"q4", "q8", "none"}));
  add_placement_options(*info_cmd, setting_flags);
  add_setting_flag<int64_t>(*info_cmd, setting_flags, "ctx_size", "-c")
      ->check(CLI::PositiveNumber);
  info_cmd->add_flag("--json", info.json);

  TokenizeArgs tok;
  auto* tokenize = app.add_subcommand("tokenize", "Text to token ids, or ids to text with --decode");
  tokenize->add_option("--tokenizer,--model", tok.tokenizer, "Model directory, tokenizer.json, .gguf or hub repository")->required();
  tokenize->add_option("--text", tok.text);
  tokenize->add_option("--file", tok.file);
  tokenize->add_option("--decode", tok.decode, "Token ids to decode, e.g. \"1,2,3\"");
  tokenize->add_flag("--add-special", tok.add_special, "Apply the post-processor (BOS)");
  tokenize->add_flag("--json", tok.json);

  ServeArgs serve;
  auto* serve_cmd =
      app.add_subcommand("serve", "Serve the OpenAI- and Anthropic-compatible HTTP API");
  add_setting_flag(*serve_cmd, setting_flags, "model", "-m");
  serve_cmd->add_option("--host", serve.host, "Address to listen on (default 127.0.0.1: this machine only)");
  serve_cmd->add_option("--port", serve.port, "Port (0: any free port)")->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--api-key", serve.api_key,
                        "Require the key: 'Authorization: Bearer KEY' or 'x-api-key: KEY'");
  add_setting_flag<int64_t>(*serve_cmd, setting_flags, "ctx_size", "-c")
      ->check(CLI::PositiveNumber);
  serve_cmd->add_option("--chat-template", serve.chat_template, "Chat template file (.jinja or .json) to use instead of the model's");
  add_setting_flag<int64_t>(*serve_cmd, setting_flags, "parallel")->check(CLI::Range(0, 4096));
  add_setting_flag<int64_t>(*serve_cmd, setting_flags, "state_budget_mib")->check(CLI::NonNegativeNumber);
  add_setting_flag<int64_t>(*serve_cmd, setting_flags, "step_tokens")->check(CLI::PositiveNumber);
  add_setting_flag<int64_t>(*serve_cmd, setting_flags, "prefill_chunk")->check(CLI::Range(16, 65536));
  add_setting_flag<int64_t>(*serve_cmd, setting_flags, "kv_blocks")->check(CLI::NonNegativeNumber);
  add_setting_flag<int64_t>(*serve_cmd, setting_flags, "prefix_cache")->check(CLI::NonNegativeNumber);
  add_setting_flag<int64_t>(*serve_cmd, setting_flags, "prefix_cache_host_mib")->check(CLI::NonNegativeNumber);
  add_setting_flag<int64_t>(*serve_cmd, setting_flags, "prefix_cache_disk_mib")->check(CLI::NonNegativeNumber);
  add_setting_flag(*serve_cmd, setting_flags, "state_dir");
  add_setting_flag(*serve_cmd, setting_flags, "speculative");
  add_setting_flag<int64_t>(*serve_cmd, setting_flags, "draft_max")->check(CLI::Range(1, 16));
  add_setting_flag(*serve_cmd, setting_flags, "draft_model");
  add_setting_flag<int64_t>(*serve_cmd, setting_flags, "self_draft_layers")
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
  add_setting_switch(*serve_cmd, setting_flags, "any_model");
  add_setting_flag<int64_t>(*serve_cmd, setting_flags, "responses_store")->check(CLI::NonNegativeNumber);
  add_setting_flag<int64_t>(*serve_cmd, setting_flags, "responses_store_mib")->check(CLI::PositiveNumber);
  serve_cmd->add_option("--alias", serve.alias, "A model name clients may use (repeatable; the first is reported)");
  serve_cmd->add_option("--quantize", serve.quantize, "Quantize on load: q4 or q8")->check(CLI::IsMember({"q4", "q8", "none"}));
  add_placement_options(*serve_cmd, setting_flags);
  serve_cmd->add_option("--shutdown-timeout", serve.shutdown_timeout, "Seconds generations may finish after SIGINT/SIGTERM")
      ->check(CLI::NonNegativeNumber);
  serve_cmd->add_option("--think-config", serve.think_config,
                        "Think control JSON (thinking budget, loop detection, escape hints, router) replacing the built-in configs/think_control.json");

  ChatArgs chat;
  auto* chat_cmd = app.add_subcommand("chat", "Chat with a model in the terminal (/reset, /exit)");
  add_setting_flag(*chat_cmd, setting_flags, "model", "-m");
  chat_cmd->add_option("--chat-template", chat.chat_template, "Chat template file to use instead of the model's");
  chat_cmd->add_option("--system", chat.system, "A system message starting the conversation");
  add_setting_flag<int64_t>(*chat_cmd, setting_flags, "ctx_size", "-c")
      ->check(CLI::PositiveNumber);
  chat_cmd->add_option("--max-tokens,-n", chat.max_tokens, "Longest answer in tokens")->check(CLI::PositiveNumber);
  chat_cmd->add_option("--temperature,-t", chat.temperature, "0 for greedy")->check(CLI::NonNegativeNumber);
  chat_cmd->add_option("--top-p", chat.top_p)->check(CLI::Range(0.0, 1.0));
  chat_cmd->add_option("--top-k", chat.top_k)->check(CLI::NonNegativeNumber);
  chat_cmd->add_option("--min-p", chat.min_p)->check(CLI::Range(0.0, 1.0));
  chat_cmd->add_option("--seed,-s", chat.seed);
  chat_cmd->add_option("--quantize", chat.quantize)->check(CLI::IsMember({"q4", "q8", "none"}));
  add_placement_options(*chat_cmd, setting_flags);
  chat_cmd->add_flag("--no-thinking", chat.no_thinking, "Ask the template for answers without reasoning (enable_thinking=false)");

  RenderArgs render;
  auto* render_cmd = app.add_subcommand("render", "Print the prompt a chat template makes of a conversation");
  render_cmd->add_option("--model,-m", render.model,
                         "Model directory, .gguf file or hub repository (org/name[:quant])");
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
  add_placement_options(*bench_cmd, setting_flags);
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
  bench_cmd
      ->add_option("--concurrency", bench.concurrency,
                    "Requests at once per run, e.g. 1,4,16,64: a table of aggregate and per-sequence decode speed, "
                    "TTFT and bytes per step instead of the usual one (--prompt's first length, default 512, and "
                    "--decode tokens, default 128, per request)")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  bench_cmd
      ->add_option("--prefix-session", bench.prefix_session,
                   "A system prompt of N tokens: time to first token cold, warm from the prefix cache's device "
                   "and host tiers, and over a five-turn session, instead of the usual table")
      ->check(CLI::Range(int64_t{513}, int64_t{1} << 20));
  bench_cmd->add_flag("--speculative", bench.speculative,
                      "Speculative decoding against plain greedy decoding instead of the usual table: a forced-"
                      "acceptance sweep and real drafters (n-gram; --draft-model), tokens checked against plain");
  bench_cmd
      ->add_option("--acceptance", bench.acceptance,
                   "With --speculative: the share of drafts forced right, in percent (default 0,25,50,70,90,100)")
      ->delimiter(',')
      ->check(CLI::Range(0, 100));
  bench_cmd
      ->add_option("--draft-lengths", bench.draft_lengths,
                   "With --speculative: drafts per verify step (default 1,2,4,8; at most what the model verifies)")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  bench_cmd->add_option("--draft-shape", bench.draft_shape,
                        "With --speculative: the sweep also pays for a draft model of this shape (random weights, "
                        "the target's vocabulary), e.g. qwen3.5-0.8b");
  bench_cmd->add_option("--draft-model", bench.draft_model,
                        "With --speculative: a draft model directory (its vocabulary the target's): a real drafter, "
                        "and a cost in the sweep");
  bench_cmd->add_option("--model,-m", bench.model,
                        "With --speculative: the target from a model directory (its own weights, tokenizer and chat "
                        "template) instead of --shape");
  bench_cmd->add_option("--output,-o", bench.output, "Also write the markdown to this file");

  CacheArgs cache;
  auto* cache_cmd = app.add_subcommand(
      "cache", "List or clear the prefix cache's files on disk (the state directory)");
  cache_cmd->require_subcommand(1);
  auto* cache_ls = cache_cmd->add_subcommand("ls",
                                             "List each model directory (fingerprint, entries, "
                                             "bytes) and its cached prefixes; changes nothing");
  add_setting_flag(*cache_ls, setting_flags, "state_dir");
  cache_ls->add_flag("--json", cache.json, "Print one JSON document");
  auto* cache_clear = cache_cmd->add_subcommand(
      "clear",
      "Remove the cached prefixes (*.state, *.state.tmp) and the model directories they empty");
  add_setting_flag(*cache_clear, setting_flags, "state_dir");
  cache_clear->add_option("--model-dir", cache.model_dir,
                          "Only this model directory (16 hex digits, as cache ls shows)");
  cache_clear->add_flag("--yes,-y", cache.yes, "Do not ask (needed when stdin is not a terminal)");

  PullArgs pull;
  auto* pull_cmd = app.add_subcommand(
      "pull", "Download a model from the Hugging Face hub into its cache; prints where it landed");
  pull_cmd
      ->add_option("ref", pull.ref,
                   "org/name[@revision][:file-or-quant], e.g. Qwen/Qwen3-0.6B or "
                   "unsloth/Qwen3-8B-GGUF:Q4_K_M")
      ->required();

  LsArgs ls;
  auto* ls_cmd = app.add_subcommand(
      "ls", "List the models in the Hugging Face hub cache (and in DIRs): size, format, family");
  ls_cmd->add_option("dirs", ls.dirs, "Model directories, or folders of them, to list too");
  ls_cmd->add_flag("--json", ls.json, "Print one JSON document");

  RmArgs rm;
  auto* rm_cmd = app.add_subcommand("rm", "Remove a repository from the Hugging Face hub cache");
  rm_cmd->add_option("ref", rm.ref, "org/name, as strata ls shows it")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    strata::log::set_level(log_level);
    // Read once, here; every layer below gets them in options.
    const strata::Settings settings =
        strata::resolve_settings(setting_flags, strata::environment_map(environ));
    strata::backend::set_tuning(strata::backend::tuning_from(settings));
    // generate, info, serve and chat load the model the settings name, else the built-in one.
    auto with_model = [&](auto& args) -> auto& {
      args.settings = settings;
      args.model = model_path(settings, argc > 0 ? argv[0] : nullptr);
      if constexpr (requires { args.model_ref; }) {
        if (!settings.model.empty() &&
            strata::hub::parse_reference(settings.model).kind == strata::hub::Reference::Kind::kRepo)
          args.model_ref = settings.model;
      }
      return args;
    };
    if (*generate) return run_generate(with_model(gen));
    if (*info_cmd) return run_info(with_model(info));
    if (*tokenize) {
      tok.tokenizer = resolve_model(tok.tokenizer);
      return run_tokenize(tok);
    }
    if (*pull_cmd) return run_pull(pull);
    if (*ls_cmd) return run_ls(ls);
    if (*rm_cmd) return run_rm(rm);
    if (*serve_cmd) return run_serve(with_model(serve));
    if (*chat_cmd) return run_chat(with_model(chat));
    if (*render_cmd) {
      if (!render.model.empty()) render.model = resolve_model(render.model);
      return run_render(render);
    }
    if (*cache_cmd) {
      cache.settings = settings;
      return *cache_ls ? run_cache_ls(cache) : run_cache_clear(cache);
    }
    if (*bench_cmd) {
      bench.settings = settings;
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
