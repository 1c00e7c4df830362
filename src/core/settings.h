// The settings registry: the choices strata makes once per process (what to load and where, and the
// switches kept for comparisons and tuning) in one typed table. A setting has a name, a type, a
// default, a command-line flag where the CLI has one, a STRATA_* environment variable and a help
// line. The CLI resolves them once at start (a flag, else the environment, else the default) and
// passes them down in options (model::LoadOptions, runtime::EngineOptions, backend::Tuning); no
// layer below it reads the environment. docs/CONFIGURATION.md lists the table.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace strata {

enum class SettingSource { kDefault, kEnvironment, kFlag };
const char* setting_source_name(SettingSource source);  // "default", "env" or "flag"

// The values in effect. Each member is one row of the table (settings.cpp), and its initializer is
// that setting's default.
struct Settings {
  // What to load, and where (model::LoadOptions; the engine's context).
  std::string model;                   // a checkpoint directory or .gguf file; "": the built-in one
  std::string device = "auto";         // auto, cpu or cuda
  std::string kv_cache_type = "auto";  // auto, f32 or bf16
  int64_t ctx_size = 0;                // tokens per sequence; 0: the command's own default
  // How many sequences the server runs at once (runtime::EngineOptions::parallel).
  int64_t parallel = 0;          // 0: as many as state_budget_mib holds, at most 64
  int64_t state_budget_mib = 0;  // 0: half the GPU's free memory, or 1 GiB on the CPU
  int64_t step_tokens = 8192;    // runtime::EngineOptions::step_tokens
  int64_t prefill_chunk = 512;   // runtime::EngineOptions::prefill_chunk (the prefix cache's interval)
  int64_t kv_blocks = 0;         // runtime::EngineOptions::kv_blocks; 0: what state_budget_mib holds
  int64_t prefix_cache = 32;     // runtime::EngineOptions::prefix_cache (entries; 0: off)
  int64_t prefix_cache_host_mib = 1024;  // EngineOptions::prefix_cache_host_bytes, in MiB
  int64_t prefix_cache_disk_mib = 8192;  // EngineOptions::prefix_cache_disk_bytes, in MiB (0: off)
  std::string state_dir;                 // the disk tier's root; "": cli::state_root()'s default
  bool prefix_cache_compress = true;     // EngineOptions::prefix_cache_compress
  bool prefill_ahead = true;             // the server prefills a chat's next turn while idle
  bool any_model = false;  // the server serves a request naming a model it does not know (no 404)
  int64_t responses_store = 1024;     // responses kept for previous_response_id and GET (0: none)
  int64_t responses_store_mib = 256;  // the memory they may take, in MiB
  // Speculative decoding (runtime::EngineOptions::speculative).
  std::string speculative = "off";  // off, ngram, draft or self
  int64_t draft_max = 4;            // drafts per verify step
  bool speculative_adaptive = true;  // EngineOptions::speculative_adaptive
  std::string draft_model;          // the draft model of speculative = draft ("": none)
  int64_t self_draft_layers = 0;    // the first layers drafting for speculative = self (0: 1/4)
  // How a model runs: switches to compare against (model::LoadOptions, runtime::EngineOptions).
  bool cuda_graphs = true;
  bool moe_fold_shared = true;
  bool run_ahead = true;
  // How CUDA kernels run: switches to compare against and to tune (backend::Tuning).
  bool cuda_pdl = true;
  std::string cuda_gemv = "tensor-cores";  // or "cores"
  int64_t gemv_row_warps = 0;              // 0: chosen per shape
  int64_t gdn_split = 0;                   // 0: chosen per shape
  int64_t cuda_feeds = 15;                 // bit mask
  bool batch_invariant = true;             // false: decode batches over 24 take the prefill GEMM
  int64_t gemv_staged_rows = 17;           // decode batches this large take the staged matmul (0: never)

  // Where each value came from, by setting name; a name absent here has its default.
  std::map<std::string, SettingSource, std::less<>> sources;

  SettingSource source(std::string_view name) const;
  // {"<name>": {"value": ..., "source": "flag" | "env" | "default"}, ...} in the table's order.
  nlohmann::ordered_json to_json() const;
};

enum class SettingType { kBool, kInt, kDouble, kString, kEnum };

using SettingValue = std::variant<bool, int64_t, double, std::string>;

// One row of the table.
struct SettingSpec {
  std::string_view name;  // snake_case; the key in JSON
  SettingType type;
  std::string_view flag = {};  // e.g. "--device"; "" where the command line has none
  std::string_view env = {};   // e.g. "STRATA_DEVICE"
  std::string_view help = {};
  // kEnum: the values allowed. kInt: the values allowed where not empty, as written in decimal.
  std::vector<std::string_view> choices = {};
  int64_t min = std::numeric_limits<int64_t>::min();  // kInt: the range allowed
  int64_t max = std::numeric_limits<int64_t>::max();
  // The member of Settings that holds the value: of the type's C++ type (kEnum: std::string).
  std::variant<bool Settings::*, int64_t Settings::*, double Settings::*, std::string Settings::*>
      field = {};
};

// The table, in the order documentation and JSON list it.
std::span<const SettingSpec> setting_specs();

// Names and values: a command line's settings by setting name, an environment by variable.
using SettingMap = std::map<std::string, std::string, std::less<>>;

// `text` as a value of `spec`'s type. Booleans are 1/0, true/false, on/off or yes/no (any case);
// numbers are decimal, whole text. A text that is not a value of the type, or not one the setting
// allows, is a kInvalidInput error naming `origin` (the flag or variable it came from).
SettingValue parse_setting_value(const SettingSpec& spec, std::string_view text,
                                 std::string_view origin);

// The settings in effect: each setting's value in `flags` (by setting name), else its variable in
// `environment`, else its default. An empty value counts as not given, and a variable a flag
// overrides is not read. A value that does not parse is an error (parse_setting_value); a flag for
// a setting that has none is a kInternal one.
Settings resolve_settings(const SettingMap& flags, const SettingMap& environment);

// The variables of an environment block (`environ`: "NAME=value" strings up to a null pointer).
SettingMap environment_map(const char* const* envp);

}  // namespace strata
