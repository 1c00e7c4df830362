// Test-side checkpoint converters for the Qwen3.5 goldens: from the HF text layout the goldens were
// made in to the other layouts a loader meets in the wild, so one transformers reference checks all:
//   - MLX (mlx-lm / mlx-vlm convert): MLX names, +1 on the 1-centred norms, conv [C, K, 1], experts
//     stacked into switch_mlp, optionally quantized by our MLX affine quantizer (router and shared
//     expert gate at 8 bits, as mlx-lm's predicate does; modules whose width does not divide the
//     group stay float);
//   - HF multimodal (Qwen3_5ForConditionalGeneration): model.language_model. prefix, nested
//     text_config, plus vision and MTP tensors that a text-only load must skip or keep;
//   - fused experts (transformers v5 Qwen3.5-MoE): experts.gate_up_proj [E, 2I, H], down_proj [E, H, I].
#pragma once

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <string>

#include "core/json.h"
#include "core/mmap.h"
#include "formats/mlx_quant.h"
#include "formats/safetensors.h"

namespace strata::test {

class CheckpointWriter {
 public:
  void put(const std::string& name, HostTensor t) {
    owned_.push_back(std::move(t));
    tensors_[name] = owned_.back().view();
  }
  void write(const std::string& dir, const Json& config) const {
    std::filesystem::create_directories(dir);
    write_file_atomic(dir + "/config.json", config.dump(2));
    formats::write_safetensors(dir + "/model.safetensors", tensors_);
  }

 private:
  std::vector<HostTensor> owned_;
  std::map<std::string, Tensor> tensors_;
};

inline HostTensor copy_of(const Tensor& t, std::optional<Shape> shape = {}) {
  HostTensor out = to_f32(t);
  if (!shape) return out;
  HostTensor r(DType::kF32, *shape);
  std::memcpy(r.as<void>(), out.as<void>(), out.view().nbytes());
  return r;
}

inline bool ends_with(const std::string& s, const std::string& suffix) { return s.ends_with(suffix); }

// The 1-centred norms MLX stores shifted by +1 (never the GDN gated norm, linear_attn.norm).
inline bool is_shifted_norm(const std::string& n) {
  return ends_with(n, "input_layernorm.weight") || ends_with(n, "post_attention_layernorm.weight") ||
         ends_with(n, "q_norm.weight") || ends_with(n, "k_norm.weight") || n == "model.norm.weight";
}

// HF text layout (model.*, lm_head) → MLX layout in out_dir.
// dequantized: store each quantized matrix dequantized back to F32 (no quantization section), the
// float twin a quantized model must reproduce up to rounding.
inline void convert_to_mlx(const std::string& hf_dir, const std::string& out_dir,
                           std::optional<formats::QuantParams> quant, bool dequantized = false) {
  const Json hf_config = read_json_file(hf_dir + "/config.json");
  const bool next = hf_config.value("model_type", "") == "qwen3_next";
  const int64_t experts = hf_config.value("num_experts", 0);
  formats::WeightStore store = formats::WeightStore::open(hf_dir);
  // Qwen3.5 conversions keep the multimodal wrapper's names; Qwen3-Next keeps model.*.
  auto rename = [&](const std::string& n) {
    if (next) return n;
    if (n.starts_with("model.")) return "language_model." + n;
    if (n.starts_with("lm_head.")) return "language_model." + n;
    return n;
  };
  CheckpointWriter out;
  Json quantization = Json::object();
  if (quant) quantization = {{"group_size", quant->group_size}, {"bits", quant->bits}};
  auto emit_matrix = [&](const std::string& module, HostTensor w) {  // module: MLX path without .weight
    const bool eight = ends_with(module, "mlp.gate") || ends_with(module, "shared_expert_gate");
    std::optional<formats::QuantParams> q = quant;
    if (q && eight) q = formats::QuantParams{8, quant->group_size};
    if (!q || w.shape()[w.view().rank() - 1] % q->group_size != 0) {
      out.put(module + ".weight", std::move(w));
      if (quant) quantization[module] = false;
      return;
    }
    if (eight) quantization[module] = {{"group_size", q->group_size}, {"bits", 8}};
    formats::QuantizedMatrix qm = formats::quantize_affine(w.view(), *q);
    if (dequantized) {
      HostTensor d = formats::dequantize_affine(qm.weight, qm.scales, qm.biases, *q, DType::kF32);
      out.put(module + ".weight", copy_of(d.view(), w.shape()));
      return;
    }
    out.put(module + ".weight", std::move(qm.weight));
    out.put(module + ".scales", std::move(qm.scales));
    out.put(module + ".biases", std::move(qm.biases));
  };
  const std::regex expert_re(R"((.*\.mlp\.)experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight)");
  std::map<std::string, std::vector<HostTensor>> stacks;  // MLX module → per-expert matrices
  for (const std::string& n : store.names()) {
    const Tensor& t = store.get(n);
    std::smatch m;
    if (std::regex_match(n, m, expert_re)) {
      auto& list = stacks[rename(m[1].str() + "switch_mlp." + m[3].str())];
      list.resize(static_cast<size_t>(experts));
      list[std::stoi(m[2].str())] = copy_of(t);
      continue;
    }
    if (n.find("conv1d.weight") != std::string::npos) {
      out.put(rename(n), copy_of(t, Shape{t.dim(0), t.dim(2), t.dim(1)}));  // [C, 1, K] → [C, K, 1]
      continue;
    }
    if (is_shifted_norm(n)) {
      HostTensor w = copy_of(t);
      for (int64_t i = 0; i < w.numel(); ++i) w.as<float>()[i] += 1.0f;
      out.put(rename(n), std::move(w));
      continue;
    }
    if (t.rank() == 2 && ends_with(n, ".weight")) {
      const std::string module = rename(n);
      emit_matrix(module.substr(0, module.size() - 7), copy_of(t));
      continue;
    }
    out.put(rename(n), copy_of(t));  // A_log, dt_bias, linear_attn.norm
  }
  for (auto& [module, list] : stacks) {
    const Shape one = list[0].shape();
    HostTensor stacked(DType::kF32, {static_cast<int64_t>(list.size()), one[0], one[1]});
    for (size_t e = 0; e < list.size(); ++e)
      std::memcpy(stacked.as<float>() + e * one.numel(), list[e].as<float>(), one.numel() * sizeof(float));
    emit_matrix(module, std::move(stacked));
  }
  const std::string wrapper = hf_config.value("model_type", "") == "qwen3_5_moe_text" ? "qwen3_5_moe" : "qwen3_5";
  Json config = next ? hf_config : Json{{"model_type", wrapper}, {"text_config", hf_config}};
  if (quant && !dequantized) config["quantization"] = quantization;
  out.write(out_dir, config);
}

// HF text layout → the multimodal wrapper layout, with a vision tensor and an MTP block added.
inline void convert_to_multimodal(const std::string& hf_dir, const std::string& out_dir) {
  const Json hf_config = read_json_file(hf_dir + "/config.json");
  formats::WeightStore store = formats::WeightStore::open(hf_dir);
  CheckpointWriter out;
  for (const std::string& n : store.names())
    out.put(n.starts_with("model.") ? "model.language_model." + n.substr(6) : n, copy_of(store.get(n)));
  const int64_t H = hf_config.at("hidden_size");
  HostTensor patch(DType::kF32, {8, 3});
  out.put("model.visual.patch_embed.proj.weight", std::move(patch));
  // An MTP block (a full-attention layer) copied from layer 3, with its own fc and norms.
  HostTensor fc(DType::kF32, {H, 2 * H});
  for (int64_t i = 0; i < H; ++i) fc.as<float>()[i * 2 * H + i] = 1.0f;
  out.put("mtp.fc.weight", std::move(fc));
  for (const char* norm : {"mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight", "mtp.norm.weight"})
    out.put(norm, HostTensor(DType::kF32, {H}));
  for (const std::string& n : store.names())
    if (n.starts_with("model.layers.3.")) out.put("mtp.layers.0." + n.substr(15), copy_of(store.get(n)));
  Json config = {{"model_type", "qwen3_5"},
                 {"architectures", {"Qwen3_5ForConditionalGeneration"}},
                 {"tie_word_embeddings", hf_config.value("tie_word_embeddings", false)},
                 {"text_config", hf_config},
                 {"vision_config", {{"depth", 1}}}};
  config["text_config"]["mtp_num_hidden_layers"] = 1;
  out.write(out_dir, config);
}

// Per-expert MoE tensors → transformers v5's fused experts.gate_up_proj / experts.down_proj.
inline void convert_to_fused_experts(const std::string& hf_dir, const std::string& out_dir) {
  const Json config = read_json_file(hf_dir + "/config.json");
  const int64_t E = config.at("num_experts");
  formats::WeightStore store = formats::WeightStore::open(hf_dir);
  const std::regex expert_re(R"((.*\.mlp\.)experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight)");
  CheckpointWriter out;
  std::map<std::string, bool> layers;  // "…mlp." prefixes with experts
  for (const std::string& n : store.names()) {
    std::smatch m;
    if (std::regex_match(n, m, expert_re)) {
      layers[m[1].str()] = true;
      continue;
    }
    out.put(n, copy_of(store.get(n)));
  }
  for (const auto& [p, _] : layers) {
    const Tensor& g0 = store.get(p + "experts.0.gate_proj.weight");
    const int64_t I = g0.dim(0), H = g0.dim(1);
    HostTensor gate_up(DType::kF32, {E, 2 * I, H}), down(DType::kF32, {E, H, I});
    for (int64_t e = 0; e < E; ++e) {
      HostTensor g = copy_of(store.get(fmt::format("{}experts.{}.gate_proj.weight", p, e)));
      HostTensor u = copy_of(store.get(fmt::format("{}experts.{}.up_proj.weight", p, e)));
      HostTensor d = copy_of(store.get(fmt::format("{}experts.{}.down_proj.weight", p, e)));
      float* gu = gate_up.as<float>() + e * 2 * I * H;
      std::memcpy(gu, g.as<float>(), I * H * sizeof(float));
      std::memcpy(gu + I * H, u.as<float>(), I * H * sizeof(float));
      std::memcpy(down.as<float>() + e * H * I, d.as<float>(), H * I * sizeof(float));
    }
    out.put(p + "experts.gate_up_proj", std::move(gate_up));
    out.put(p + "experts.down_proj", std::move(down));
  }
  out.write(out_dir, config);
}

}  // namespace strata::test
