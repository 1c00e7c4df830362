// Implements the default, linear, dynamic-NTK, YaRN and Llama-3 frequency schedules.
#include "model/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace strata::model {

namespace {

std::vector<float> base_inv_freq(double base, int dim) {
  std::vector<float> f(dim / 2);
  for (int i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    f[i] = 1.0f / std::pow(static_cast<float>(base), exponent);
  }
  return f;
}

double yarn_mscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

void apply_yarn(const ModelConfig& cfg, int dim, backend::RopeParams& p) {
  const RopeConfig& r = cfg.rope;
  const double base = r.theta;
  const double factor = r.factor;
  const double orig = r.original_max_position > 0 ? static_cast<double>(r.original_max_position)
                                                  : static_cast<double>(cfg.max_position_embeddings);
  if (r.attention_factor) {
    p.attention_factor = static_cast<float>(*r.attention_factor);
  } else if (r.mscale != 0.0 && r.mscale_all_dim != 0.0) {
    p.attention_factor = static_cast<float>(yarn_mscale(factor, r.mscale) / yarn_mscale(factor, r.mscale_all_dim));
  } else {
    p.attention_factor = static_cast<float>(yarn_mscale(factor, 1.0));
  }
  auto correction_dim = [&](double rotations) {
    return (dim * std::log(orig / (rotations * 2 * std::numbers::pi))) / (2 * std::log(base));
  };
  double low = correction_dim(r.beta_fast), high = correction_dim(r.beta_slow);
  if (r.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  for (int i = 0; i < dim / 2; ++i) {
    const float pos_freq = std::pow(static_cast<float>(base), static_cast<float>(2 * i) / static_cast<float>(dim));
    const float extrapolation = 1.0f / pos_freq;
    const float interpolation = 1.0f / (static_cast<float>(factor) * pos_freq);
    const float ramp = std::clamp(static_cast<float>((i - low) / (high - low)), 0.0f, 1.0f);
    const float extrapolation_weight = 1.0f - ramp;
    p.inv_freq[i] = interpolation * (1.0f - extrapolation_weight) + extrapolation * extrapolation_weight;
  }
}

void apply_llama3(const RopeConfig& r, backend::RopeParams& p) {
  const double old_len = static_cast<double>(r.original_max_position);
  const double low_wavelen = old_len / r.low_freq_factor;
  const double high_wavelen = old_len / r.high_freq_factor;
  const float factor = static_cast<float>(r.factor);
  for (float& f : p.inv_freq) {
    const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
    if (wavelen > low_wavelen) {
      f = f / factor;
    } else if (wavelen >= high_wavelen) {  // medium: interpolate
      const float smooth = static_cast<float>((old_len / wavelen - r.low_freq_factor) /
                                              (r.high_freq_factor - r.low_freq_factor));
      f = (1.0f - smooth) * f / factor + smooth * f;
    }
  }
}

}  // namespace

backend::RopeParams make_rope_params(const ModelConfig& cfg, int64_t seq_len) {
  backend::RopeParams p;
  const int dim = static_cast<int>(cfg.rotary_dim());
  p.rotary_dim = dim;
  p.neox = !cfg.rope_interleaved;
  const RopeConfig& r = cfg.rope;
  if (r.type == "dynamic") {
    const int64_t max_pos = r.original_max_position > 0 ? r.original_max_position : cfg.max_position_embeddings;
    double base = r.theta;
    if (seq_len > max_pos) {
      base = base * std::pow(r.factor * static_cast<double>(seq_len) / static_cast<double>(max_pos) - (r.factor - 1.0),
                             static_cast<double>(dim) / (dim - 2));
    }
    p.inv_freq = base_inv_freq(base, dim);
    return p;
  }
  p.inv_freq = base_inv_freq(r.theta, dim);
  if (r.type == "linear") {
    for (float& f : p.inv_freq) f /= static_cast<float>(r.factor);
  } else if (r.type == "yarn") {
    apply_yarn(cfg, dim, p);
  } else if (r.type == "llama3") {
    apply_llama3(r, p);
  }
  return p;
}

}  // namespace strata::model
