// strata info: what a checkpoint is and what it needs in memory.
#include <fmt/format.h>

#include <iostream>

#include "cli/commands.h"
#include "cli/human_bytes.h"
#include "cli/model_loading.h"
#include "core/json.h"
#include "model/model.h"

namespace strata::cli {

int run_info(const InfoArgs& args) {
  auto model = model::load_model(args.model, load_options(args.settings, args.quantize));
  const model::ModelInfo i = model->info();
  const model::ModelConfig& c = model->config();
  const int64_t ctx_size = context_size(args.settings);
  const size_t state =
      i.state_bytes_fixed + i.state_bytes_per_token * static_cast<size_t>(ctx_size);
  if (args.json) {
    Json out = {{"family", i.family},
                {"layers", i.layers},
                {"attention_layers", i.attention_layers},
                {"recurrent_layers", i.recurrent_layers},
                {"parameters", i.parameters},
                {"quantization", i.quantization},
                {"weight_bytes", i.weight_bytes},
                {"state_bytes", state},
                {"kv_cache_type", model::kv_cache_type_name(i.kv_cache_dtype)},
                {"context_size", ctx_size},
                {"vocab_size", c.vocab_size},
                {"hidden_size", c.hidden_size},
                {"mtp_layers", i.mtp_layers},
                {"moe_shared_folded", i.moe_shared_folded},
                {"device", backend::device_label(model->device())},
                {"fingerprint", model->fingerprint()},
                {"settings", args.settings.to_json()}};
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "family          {}\n"
      "layers          {} ({} attention, {} recurrent; {} MTP)\n"
      "hidden size     {}\n"
      "heads           {} query, {} key/value, head dim {}\n"
      "vocabulary      {}\n"
      "parameters      {} ({:.1f} M)\n"
      "quantization    {}\n"
      "weights         {} (as loaded on {})\n"
      "state           {} for a {}-token context (KV cache {})\n"
      "memory needed   {}\n"
      "fingerprint     {}\n",
      i.family, i.layers, i.attention_layers, i.recurrent_layers, i.mtp_layers, c.hidden_size,
      c.num_heads, c.num_kv_heads, c.head_dim, c.vocab_size, i.parameters,
      static_cast<double>(i.parameters) / 1e6, i.quantization, human_bytes(i.weight_bytes),
      backend::device_name(model->device()), human_bytes(state), ctx_size,
      model::kv_cache_type_name(i.kv_cache_dtype), human_bytes(i.weight_bytes + state),
      model->fingerprint());
  return 0;
}

}  // namespace strata::cli
