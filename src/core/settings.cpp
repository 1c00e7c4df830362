// The settings table and its resolution: flag, else environment, else default.
#include "core/settings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace strata {

namespace {

const std::vector<SettingSpec>& table() {
  static const std::vector<SettingSpec> rows = {
      {.name = "model",
       .type = SettingType::kString,
       .flag = "--model",
       .env = "STRATA_MODEL",
       .help = "Model directory, .gguf file or Hugging Face repository "
               "org/name[@revision][:file-or-quant], fetched into the hub cache on first use "
               "(default: the built-in strata-demo)",
       .field = &Settings::model},
      {.name = "device",
       .type = SettingType::kEnum,
       .flag = "--device",
       .env = "STRATA_DEVICE",
       .help = "Where to run: cuda, cpu or auto (the GPU when there is one)",
       .choices = {"auto", "cpu", "cuda"},
       .field = &Settings::device},
      {.name = "kv_cache_type",
       .type = SettingType::kEnum,
       .flag = "--kv-cache-type",
       .env = "STRATA_KV_CACHE_TYPE",
       .help = "KV cache element type: auto (bf16 where the checkpoint is 16-bit or "
               "MLX-quantized, f32 for an f32 one), f32 or bf16",
       .choices = {"auto", "f32", "bf16"},
       .field = &Settings::kv_cache_type},
      {.name = "ctx_size",
       .type = SettingType::kInt,
       .flag = "--ctx-size",
       .env = "STRATA_CTX_SIZE",
       .help = "Context size in tokens per sequence (default: 4096; for serve, the model's "
               "trained context, at most 4096)",
       .min = 0,
       .field = &Settings::ctx_size},
      {.name = "parallel",
       .type = SettingType::kInt,
       .flag = "--parallel",
       .env = "STRATA_PARALLEL",
       .help = "Requests the server generates at once, each with its own state slot (recurrent "
               "state and a KV block table) (0: at most 64, as many as half the state budget's "
               "recurrent state holds)",
       .min = 0,
       .max = 4096,
       .field = &Settings::parallel},
      {.name = "step_tokens",
       .type = SettingType::kInt,
       .flag = "--step-tokens",
       .env = "STRATA_STEP_TOKENS",
       .help = "Tokens an engine step may run (decodes count one each; prompts take whole 512-token "
               "chunks, the first always runs): larger gives the first tokens of many prompts "
               "arriving together sooner, smaller keeps running generations' steps short",
       .min = 1,
       .field = &Settings::step_tokens},
      {.name = "prefill_chunk",
       .type = SettingType::kInt,
       .flag = "--prefill-chunk",
       .env = "STRATA_PREFILL_CHUNK",
       .help = "Prompt tokens per prefill forward, counted from each message's start: also the "
               "interval at which the prefix cache keeps a prompt's state (a multiple of 64, the "
               "KV block; other values run without the prefix cache)",
       .min = 16,
       .max = 65536,
       .field = &Settings::prefill_chunk},
      {.name = "kv_blocks",
       .type = SettingType::kInt,
       .flag = "--kv-blocks",
       .env = "STRATA_KV_BLOCKS",
       .help = "KV cache blocks of 64 tokens that the server's sequences share (0: what the state "
               "budget holds after the slots' recurrent state, at most every slot's whole "
               "context); when they run out the newest requests wait, their KV in host memory",
       .min = 0,
       .field = &Settings::kv_blocks},
      {.name = "prefix_cache",
       .type = SettingType::kInt,
       .flag = "--prefix-cache",
       .env = "STRATA_PREFIX_CACHE",
       .help = "Prompt prefixes (the state every prefill_chunk tokens and where each chat message "
               "begins) kept in device memory so that later requests starting with them skip "
               "their prefill, exactly as if they had run it; "
               "each holds its KV blocks and, for hybrid models, a copy of the recurrent state "
               "(0: off)",
       .min = 0,
       .max = 4096,
       .field = &Settings::prefix_cache},
      {.name = "prefix_cache_host_mib",
       .type = SettingType::kInt,
       .flag = "--prefix-cache-host",
       .env = "STRATA_PREFIX_CACHE_HOST",
       .help = "MiB of host memory for cached prompt prefixes moved out of device memory (the "
               "least recently used, when prefix_cache entries are cached or their blocks are "
               "needed); a hit there moves the prefix back (0: such prefixes are dropped). With a GPU "
               "this memory is page-locked (by the server when it starts)",
       .min = 0,
       .field = &Settings::prefix_cache_host_mib},
      {.name = "prefix_cache_disk_mib",
       .type = SettingType::kInt,
       .flag = "--prefix-cache-disk",
       .env = "STRATA_PREFIX_CACHE_DISK",
       .help = "MiB of disk for cached prompt prefixes, kept in state_dir across restarts: each "
               "prompt's longest cached prefix is written there, and prefixes dropped from host "
               "memory move there; the least recently used files go first (0: no disk tier)",
       .min = 0,
       .field = &Settings::prefix_cache_disk_mib},
      {.name = "state_dir",
       .type = SettingType::kString,
       .flag = "--state-dir",
       .env = "STRATA_STATE_DIR",
       .help = "Directory of the prefix cache's disk tier, one subdirectory per model and state "
               "layout (\"\": $STRATA_DATA_DIR/state, else $XDG_DATA_HOME/strata/state, else "
               "~/.local/share/strata/state)",
       .field = &Settings::state_dir},
      {.name = "prefix_cache_compress",
       .type = SettingType::kBool,
       .env = "STRATA_PREFIX_CACHE_COMPRESS",
       .help = "Write the disk tier's files compressed (zstd, each 4 MiB chunk's bytes shuffled "
               "so that BF16 values' exponents compress apart): about 70% of the bytes to read "
               "back, decompressed on several threads while the disk streams (false: plain files; "
               "both kinds are read)",
       .field = &Settings::prefix_cache_compress},
      {.name = "prefill_ahead",
       .type = SettingType::kBool,
       .env = "STRATA_PREFILL_AHEAD",
       .help = "After a chat response, prefill the conversation as the next turn's prompt will "
               "begin (the answer in its history form) while nothing else runs, so that the next "
               "turn starts from the prefix cache up to its new message; it gives way at once to "
               "any request (false: only prompts that ran are cached)",
       .field = &Settings::prefill_ahead},
      {.name = "any_model",
       .type = SettingType::kBool,
       .flag = "--any-model",
       .env = "STRATA_ANY_MODEL",
       .help = "Serve requests that name a model this server does not serve with its own model "
               "instead of answering 404 (agents send their own model names, e.g. "
               "claude-sonnet-4-5); every API route, and responses name the served model",
       .field = &Settings::any_model},
      {.name = "responses_store",
       .type = SettingType::kInt,
       .flag = "--responses-store",
       .env = "STRATA_RESPONSES_STORE",
       .help = "Responses of /v1/responses (store: true) the server keeps in memory for "
               "previous_response_id and GET /v1/responses/{id}; past it, or past "
               "responses_store_mib, the least recently used go first (0: none is kept)",
       .min = 0,
       .field = &Settings::responses_store},
      {.name = "responses_store_mib",
       .type = SettingType::kInt,
       .flag = "--responses-store-mib",
       .env = "STRATA_RESPONSES_STORE_MIB",
       .help = "MiB of memory for the kept responses (each counted as its JSON text: the "
               "response and the conversation it continues)",
       .min = 1,
       .field = &Settings::responses_store_mib},
      {.name = "speculative",
       .type = SettingType::kEnum,
       .flag = "--speculative",
       .env = "STRATA_SPECULATIVE",
       .help = "Speculative decoding of requests that do not choose for themselves: ngram "
               "(drafts looked up in the prompt and output), draft (drafts from draft_model) or "
               "self (drafts from the model's own first self_draft_layers layers), checked k at a "
               "time in one step, the tokens exactly plain decoding's; or off",
       .choices = {"off", "ngram", "draft", "self"},
       .field = &Settings::speculative},
      {.name = "draft_max",
       .type = SettingType::kInt,
       .flag = "--draft-max",
       .env = "STRATA_DRAFT_MAX",
       .help = "Draft tokens a speculative verify step checks at most (fewer where the model "
               "verifies fewer rows at once)",
       .min = 1,
       .max = 16,
       .field = &Settings::draft_max},
      {.name = "speculative_adaptive",
       .type = SettingType::kBool,
       .env = "STRATA_SPECULATIVE_ADAPTIVE",
       .help = "Each verify step drafts as many tokens as pay, from the request's running "
               "acceptance and the measured cost of each verify length, and none while drafts do "
               "not pay (false: always up to draft_max)",
       .field = &Settings::speculative_adaptive},
      {.name = "draft_model",
       .type = SettingType::kString,
       .flag = "--draft-model",
       .env = "STRATA_DRAFT_MODEL",
       .help = "A small model (a directory, .gguf file or hub repository, as --model) with the "
               "model's vocabulary that drafts for speculative decoding "
               "(method draft; a request may ask for it when one is loaded), e.g. "
               "models/strata-demo-draft for the built-in strata-demo",
       .field = &Settings::draft_model},
      {.name = "self_draft_layers",
       .type = SettingType::kInt,
       .flag = "--self-draft-layers",
       .env = "STRATA_SELF_DRAFT_LAYERS",
       .help = "The model's first layers that draft for self-speculation (method self; a request "
               "may ask for another count), then its final norm and head; fewer than its layers "
               "(0: a quarter of them, at least 1)",
       .min = 0,
       .field = &Settings::self_draft_layers},
      {.name = "state_budget_mib",
       .type = SettingType::kInt,
       .flag = "--state-budget",
       .env = "STRATA_STATE_BUDGET",
       .help = "MiB of memory for sequence state (KV cache and recurrent state) that sizes the "
               "server's slots when parallel is 0 and its KV blocks when kv_blocks is 0 (0: half "
               "the GPU's free memory after loading, 1024 on the CPU)",
       .min = 0,
       .field = &Settings::state_budget_mib},
      {.name = "cuda_graphs",
       .type = SettingType::kBool,
       .env = "STRATA_CUDA_GRAPHS",
       .help = "Replay decode steps as CUDA graphs (false: every step runs eagerly, to compare)",
       .field = &Settings::cuda_graphs},
      {.name = "moe_fold_shared",
       .type = SettingType::kBool,
       .env = "STRATA_MOE_FOLD_SHARED",
       .help = "Run an MoE model's shared expert as one more routed expert where it has their "
               "shape and format (false: on its own, to compare)",
       .field = &Settings::moe_fold_shared},
      {.name = "run_ahead",
       .type = SettingType::kBool,
       .env = "STRATA_RUN_AHEAD",
       .help = "On a GPU, queue each decode step before the host has read the token it feeds "
               "(false: the plain loop, to compare)",
       .field = &Settings::run_ahead},
      {.name = "cuda_pdl",
       .type = SettingType::kBool,
       .env = "STRATA_CUDA_PDL",
       .help = "Launch CUDA kernels with Programmatic Dependent Launch from compute capability "
               "9.0 (false: plain launches, to compare)",
       .field = &Settings::cuda_pdl},
      {.name = "cuda_gemv",
       .type = SettingType::kEnum,
       .env = "STRATA_CUDA_GEMV",
       .help = "The decode matmul of quantized weights: tensor-cores (integer tensor cores) or "
               "cores (the CUDA-core kernel, to compare)",
       .choices = {"tensor-cores", "cores"},
       .field = &Settings::cuda_gemv},
      {.name = "gemv_row_warps",
       .type = SettingType::kInt,
       .env = "STRATA_GEMV_ROW_WARPS",
       .help = "Row groups (of 16 rows, one per warp) in a block of the tensor-core decode "
               "matmul: 1, 2, 4 or 8, for tuning (0: chosen per shape)",
       .choices = {"0", "1", "2", "4", "8"},
       .field = &Settings::gemv_row_warps},
      {.name = "gdn_split",
       .type = SettingType::kInt,
       .env = "STRATA_GDN_SPLIT",
       .help = "Parts each value head's rows are split into by the one-token GDN kernel: 1, 2, "
               "4 or 8 where that fits, for tuning (0: 2 where it fits, else 1)",
       .choices = {"0", "1", "2", "4", "8"},
       .field = &Settings::gdn_split},
      {.name = "batch_invariant",
       .type = SettingType::kBool,
       .env = "STRATA_BATCH_INVARIANT",
       .help = "On a GPU, decode batches of many sequences take matmul kernels that give each "
               "sequence exactly the bits it gets alone (false: batches of more than 24 take the "
               "prefill GEMM, faster there, but a sequence's last bits, and so at times its "
               "tokens, depend on what else runs)",
       .field = &Settings::batch_invariant},
      {.name = "gemv_staged_rows",
       .type = SettingType::kInt,
       .env = "STRATA_GEMV_STAGED_ROWS",
       .help = "On a GPU, decode batches of at least this many sequences take the multi-row "
               "matmul that stages weights and activations in shared memory (same bits as the "
               "other; 0: never, to compare)",
       .min = 0,
       .max = 64,
       .field = &Settings::gemv_staged_rows},
      {.name = "cuda_feeds",
       .type = SettingType::kInt,
       .env = "STRATA_CUDA_FEEDS",
       .help = "Decode matmuls that take their input converted by the op that wrote it, a bit "
               "mask: 1 norms, 2 gate/up, 4 GDN core, 8 attention gate (0: each converts its "
               "own, to compare)",
       .min = 0,
       .max = 15,
       .field = &Settings::cuda_feeds},
  };
  return rows;
}

std::string lower(std::string_view text) {
  std::string s(text);
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool parse_bool(std::string_view text, std::string_view origin) {
  const std::string t = lower(text);
  if (t == "1" || t == "true" || t == "on" || t == "yes") return true;
  if (t == "0" || t == "false" || t == "off" || t == "no") return false;
  fail(ErrorKind::kInvalidInput, "{}: '{}' is not a boolean (1/0, true/false, on/off, yes/no)",
       origin, text);
}

int64_t parse_int(const SettingSpec& spec, std::string_view text, std::string_view origin) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  check(ec != std::errc::result_out_of_range, ErrorKind::kInvalidInput, "{}: '{}' is out of range",
        origin, text);
  check(ec == std::errc() && end == text.data() + text.size(), ErrorKind::kInvalidInput,
        "{}: '{}' is not an integer", origin, text);
  check(v >= spec.min, ErrorKind::kInvalidInput, "{}: {} is below the minimum, {}", origin, v,
        spec.min);
  check(v <= spec.max, ErrorKind::kInvalidInput, "{}: {} is above the maximum, {}", origin, v,
        spec.max);
  check(spec.choices.empty() ||
            std::ranges::find(spec.choices, std::to_string(v)) != spec.choices.end(),
        ErrorKind::kInvalidInput, "{}: {} is not one of {}", origin, v,
        fmt::join(spec.choices, ", "));
  return v;
}

double parse_double(std::string_view text, std::string_view origin) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  check(ec == std::errc() && end == text.data() + text.size() && std::isfinite(v),
        ErrorKind::kInvalidInput, "{}: '{}' is not a finite number", origin, text);
  return v;
}

// The value of `spec`'s member in `s`, typed.
SettingValue value_of(const Settings& s, const SettingSpec& spec) {
  return std::visit([&](auto member) { return SettingValue(s.*member); }, spec.field);
}

// Stores `value` in `spec`'s member of `s`; a value of another type is a bug in the table.
void store(Settings& s, const SettingSpec& spec, SettingValue value) {
  std::visit(
      [&](auto member) {
        using T = std::remove_reference_t<decltype(s.*member)>;
        T* held = std::get_if<T>(&value);
        check(held != nullptr, ErrorKind::kInternal,
              "setting '{}': its type does not match its member", spec.name);
        s.*member = std::move(*held);
      },
      spec.field);
}

}  // namespace

const char* setting_source_name(SettingSource source) {
  switch (source) {
    case SettingSource::kDefault:
      return "default";
    case SettingSource::kEnvironment:
      return "env";
    case SettingSource::kFlag:
      return "flag";
  }
  return "default";
}

std::span<const SettingSpec> setting_specs() { return table(); }

SettingValue parse_setting_value(const SettingSpec& spec, std::string_view text,
                                 std::string_view origin) {
  switch (spec.type) {
    case SettingType::kBool:
      return parse_bool(text, origin);
    case SettingType::kInt:
      return parse_int(spec, text, origin);
    case SettingType::kDouble:
      return parse_double(text, origin);
    case SettingType::kString:
      return std::string(text);
    case SettingType::kEnum:
      check(std::ranges::find(spec.choices, text) != spec.choices.end(), ErrorKind::kInvalidInput,
            "{}: '{}' is not one of {}", origin, text, fmt::join(spec.choices, ", "));
      return std::string(text);
  }
  fail(ErrorKind::kInternal, "setting '{}' has no type", spec.name);
}

Settings resolve_settings(const SettingMap& flags, const SettingMap& environment) {
  for (const auto& [name, value] : flags) {
    const auto spec = std::ranges::find(table(), name, &SettingSpec::name);
    check(spec != table().end() && !spec->flag.empty(), ErrorKind::kInternal,
          "no setting '{}' is given by a flag", name);
  }
  Settings s;
  for (const SettingSpec& spec : table()) {
    const auto flag = flags.find(spec.name);
    const auto env = environment.find(spec.env);
    if (flag != flags.end() && !flag->second.empty()) {
      store(s, spec, parse_setting_value(spec, flag->second, spec.flag));
      s.sources[std::string(spec.name)] = SettingSource::kFlag;
    } else if (env != environment.end() && !env->second.empty()) {
      store(s, spec, parse_setting_value(spec, env->second, spec.env));
      s.sources[std::string(spec.name)] = SettingSource::kEnvironment;
    }
  }
  return s;
}

SettingSource Settings::source(std::string_view name) const {
  const auto it = sources.find(name);
  return it == sources.end() ? SettingSource::kDefault : it->second;
}

nlohmann::ordered_json Settings::to_json() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const SettingSpec& spec : table()) {
    nlohmann::ordered_json value;
    std::visit([&](const auto& v) { value = v; }, value_of(*this, spec));
    out[std::string(spec.name)] = {{"value", std::move(value)},
                                   {"source", setting_source_name(source(spec.name))}};
  }
  return out;
}

SettingMap environment_map(const char* const* envp) {
  SettingMap vars;
  for (; envp != nullptr && *envp != nullptr; ++envp) {
    const char* eq = std::strchr(*envp, '=');
    if (eq != nullptr) vars.emplace(std::string(*envp, eq), std::string(eq + 1));
  }
  return vars;
}

}  // namespace strata
