// The strata subcommands. main.cpp parses the command line (CLI11 stays in that one file) and
// calls these; each returns the process exit code and throws strata::Error on failure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/settings.h"

namespace strata::cli {

// The commands that load a model take the settings in effect (main resolves them from the flags,
// the environment and the defaults) and the model they name, else the built-in one.

struct GenerateArgs {
  Settings settings;
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
  bool json = false;
  bool ignore_eos = false;
};
int run_generate(const GenerateArgs& args);

struct InfoArgs {
  Settings settings;
  std::string model;
  std::string quantize;
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

struct ServeArgs {
  Settings settings;  // ctx_size 0: the model's trained context, at most 4096
  std::string model;
  std::string model_ref;  // the hub repository --model named (the name served); "" for a path
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (printed at start)
  std::string api_key;
  std::string chat_template;  // a .jinja (or .json) file overriding the model's template
  size_t max_concurrency = 64;
  size_t max_body_bytes = 16 << 20;
  size_t max_connections = 4096;             // open at once (within the open-file limit)
  size_t max_connections_per_client = 1024;  // open at once from one client address
  double header_timeout = 10;      // seconds from a request's first byte to its last header
  double body_timeout = 60;        // seconds for a request's body
  double keep_alive_timeout = 5;   // seconds a connection may wait for its next request
  double write_timeout = 30;       // seconds a response write may make no progress
  std::vector<std::string> alias;  // names requests may use for the model; the first is reported
  std::string quantize;
  double shutdown_timeout = 30;  // seconds generations may run on after SIGINT/SIGTERM
  std::string think_config;      // JSON file replacing the built-in think control config
};
int run_serve(const ServeArgs& args);

struct ChatArgs {
  Settings settings;
  std::string model;
  std::string chat_template;
  std::string system;
  int64_t max_tokens = 1024;  // per answer
  float temperature = 0.7f;
  float top_p = 0.95f;
  int top_k = 0;
  float min_p = 0.0f;
  uint64_t seed = 0;
  std::string quantize;
  bool no_thinking = false;
};
int run_chat(const ChatArgs& args);

struct RenderArgs {
  std::string model;          // model directory or .gguf file
  std::string template_file;  // a .jinja (or .json) template instead of the model's
  std::string messages;       // JSON file ("-": stdin): a list of messages, or a request body
  std::string tools;          // JSON file with the OpenAI tools list
  std::string kwargs;         // template variables as a JSON object (chat_template_kwargs)
  bool add_generation_prompt = false;
};
int run_render(const RenderArgs& args);

struct BenchArgs {
  Settings settings;                // device, kv_cache_type and how the model runs
  std::vector<std::string> shapes;  // empty: the five real shapes (cli/bench_shapes.h)
  std::vector<int> bits;            // 4 and/or 8; empty: both
  std::vector<int64_t> prompts;   // prefill lengths; empty: 512, 4096 (--quick: 16, 64)
  int64_t decode = 0;             // tokens per decode run; 0: 128 (--quick: 8)
  std::vector<int64_t> contexts;  // prompts before decoding; empty: 512, 16384 (--quick: 16, 64)
  int64_t layers = 0;             // keep the first N layers of each shape; 0: all
  bool breakdown = true;          // per-op times of a Qwen3.5-9B decode step (CUDA only)
  float temperature = 0.0f;       // sampling of the timed requests; 0: greedy
  float top_p = 1.0f;
  float presence_penalty = 0.0f;
  bool quick = false;
  // Concurrent requests per run (e.g. 1,4,16,64): the concurrency table instead of the usual one,
  // with --prompt's first length (default 512) and --decode tokens (default 128) per request.
  std::vector<int64_t> concurrency;
  // A system prompt of this many tokens: the prefix-cache table (cli/bench_prefix.h) instead.
  int64_t prefix_session = 0;
  // Speculative decoding against plain decoding (cli/bench_speculative.h) instead: a forced-acceptance
  // sweep over `acceptance` (percent) and `draft_lengths`, its drafts free or paying for a draft
  // model of `draft_shape` (random weights) or the `draft_model` directory, and the real drafters
  // (n-gram, `draft_model`) on `model` (a directory: its tokenizer and chat template) or the shapes;
  // --prompt's first length (default 512) and --decode tokens (default 128) per request.
  bool speculative = false;
  std::vector<int> acceptance;         // empty: 0,25,50,70,90,100
  std::vector<int64_t> draft_lengths;  // empty: 1,2,4,8
  std::string draft_shape;
  std::string draft_model;
  std::string model;
  std::string output;        // also write the markdown here
  std::string command_line;  // printed above the table
};
int run_bench(const BenchArgs& args);

// strata cache ls / clear: the prefix cache's files on disk, under the state root
// (cli::state_root: the state_dir setting, else the data directory's).
struct CacheArgs {
  Settings settings;      // state_dir
  bool json = false;      // ls: one JSON document
  std::string model_dir;  // clear: only this model directory (16 hex digits); "": every one
  bool yes = false;       // clear: no question asked (needed when stdin is not a terminal)
};
int run_cache_ls(const CacheArgs& args);
int run_cache_clear(const CacheArgs& args);

// strata pull / ls / rm: models of the Hugging Face hub cache (hub/; HF_HOME, HF_HUB_CACHE,
// HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE as huggingface_hub reads them).
struct PullArgs {
  std::string ref;  // org/name[@revision][:file-or-quant]
};
int run_pull(const PullArgs& args);  // prints the path the model loads from

struct LsArgs {
  std::vector<std::string> dirs;  // model directories (or folders of them) listed beside the cache
  bool json = false;
};
int run_ls(const LsArgs& args);

struct RmArgs {
  std::string ref;  // org/name: the whole repository leaves the cache
};
int run_rm(const RmArgs& args);

}  // namespace strata::cli
