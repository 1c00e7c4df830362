// Shape checks and device dispatch for the mixture-of-experts ops (backend/moe.h).
#include "backend/moe.h"

#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/dispatch.h"

namespace strata::backend {

using detail::placement;
using detail::require_f32;

void topk_softmax(const Tensor& logits, int64_t k, bool renormalize, const Tensor& ids, const Tensor& weights,
                  bool shared_last) {
  const Device d = placement("topk_softmax", {&logits, &ids, &weights});
  require_f32("topk_softmax", {&logits, &weights});
  const int64_t slots = k + (shared_last ? 1 : 0);
  const int64_t experts = logits.rank() == 2 ? logits.dim(1) - (shared_last ? 1 : 0) : 0;
  check(logits.rank() == 2 && k > 0 && k <= experts && ids.dtype == DType::kI32 && ids.rank() == 2 &&
            ids.dim(0) == logits.dim(0) && ids.dim(1) == slots && weights.shape == ids.shape,
        ErrorKind::kInternal, "topk_softmax: logits {} k {}{} ids {} weights {}", logits.shape.str(), k,
        shared_last ? " and a shared expert" : "", ids.shape.str(), weights.shape.str());
  STRATA_CUDA_DISPATCH("topk_softmax", d, cuda::topk_softmax(logits, k, renormalize, ids, weights, shared_last));
  cpu::topk_softmax(logits, k, renormalize, ids, weights, shared_last);
}

namespace {
// Entries per expert in a table: codes (or F32 values), scales and biases of gate, up and down.
constexpr int64_t kTableEntries = 9;
}  // namespace

void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, std::span<const Weight> gate,
                 std::span<const Weight> up, std::span<const Weight> down, const Tensor& table, const Tensor& out) {
  const Device d = placement("moe_experts", {&x, &ids, &weights, &out});
  require_f32("moe_experts", {&x, &weights, &out});
  const int64_t E = static_cast<int64_t>(gate.size());
  check(E > 0 && up.size() == gate.size() && down.size() == gate.size(), ErrorKind::kInternal,
        "moe_experts: {} gate, {} up, {} down weights", gate.size(), up.size(), down.size());
  const int64_t I = gate[0].rows(), H = gate[0].cols();
  check(x.rank() == 2 && x.dim(1) == H && out.shape == x.shape && ids.dtype == DType::kI32 && ids.rank() == 2 &&
            ids.dim(0) == x.dim(0) && ids.dim(1) > 0 && weights.shape == ids.shape && up[0].rows() == I &&
            up[0].cols() == H && down[0].rows() == H && down[0].cols() == I,
        ErrorKind::kInternal, "moe_experts: x {} ids {} weights {} out {}, experts [{}, {}] / [{}, {}]", x.shape.str(),
        ids.shape.str(), weights.shape.str(), out.shape.str(), I, H, down[0].rows(), down[0].cols());
  if (d == Device::kCuda) {
    check(ids.dim(1) <= kMoeExpertsMaxPerToken, ErrorKind::kUnsupported,
          "GPU experts: {} experts per token (at most {})", ids.dim(1), kMoeExpertsMaxPerToken);
    check(table.device == Device::kCuda && table.dtype == DType::kU64 && table.numel() == E * kTableEntries,
          ErrorKind::kInternal, "moe_experts: the expert table {} does not describe {} experts", table.shape.str(), E);
  }
  STRATA_CUDA_DISPATCH("moe_experts", d, cuda::moe_experts(x, ids, weights, gate[0], E, table, out));
  cpu::moe_experts(x, ids, weights, gate, up, down, out);
}

Buffer expert_table(Device device, std::span<const Weight> gate, std::span<const Weight> up,
                    std::span<const Weight> down) {
  if (device == Device::kCpu) return Buffer{};
  const size_t E = gate.size();
  check(E > 0 && up.size() == E && down.size() == E, ErrorKind::kInternal, "expert_table: {} / {} / {} experts", E,
        up.size(), down.size());
  const Weight& f = gate[0];
  check(f.w.dtype == DType::kF32 ||
            (f.quantized() && (f.bits == 4 || f.bits == 8) &&
             (f.group_size == 32 || f.group_size == 64 || f.group_size == 128) &&
             (f.scales.dtype == DType::kF32 || f.scales.dtype == DType::kBF16 || f.scales.dtype == DType::kF16)),
        ErrorKind::kUnsupported, "GPU experts: {}-bit weights with groups of {} are not supported", f.bits,
        f.group_size);
  std::vector<uint64_t> entries;
  entries.reserve(E * kTableEntries);
  for (size_t e = 0; e < E; ++e) {
    for (const Weight* w : {&gate[e], &up[e], &down[e]}) {
      check(same_format(*w, f) && w->w.device == device && (!w->quantized() || (w->scales.device == device &&
                                                                                 w->biases.device == device)),
            ErrorKind::kInvalidInput, "expert {}: its weights differ in format or place from expert 0's", e);
      for (const Tensor* t : {&w->w, &w->scales, &w->biases})
        entries.push_back(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t->data)));
    }
  }
  Buffer table(device, DType::kU64, {static_cast<int64_t>(E), kTableEntries});
  copy_from_host(entries.data(), table);
  return table;
}

void add_sigmoid_gated(const Tensor& x, const Tensor& y, const Tensor& gate) {
  const Device d = placement("add_sigmoid_gated", {&x, &y, &gate});
  require_f32("add_sigmoid_gated", {&x, &y, &gate});
  check(y.numel() == x.numel() && gate.numel() > 0 && x.numel() % gate.numel() == 0 && x.dim(0) == gate.dim(0),
        ErrorKind::kInternal, "add_sigmoid_gated: x {} y {} gate {}", x.shape.str(), y.shape.str(),
        gate.shape.str());
  STRATA_CUDA_DISPATCH("add_sigmoid_gated", d, cuda::add_sigmoid_gated(x, y, gate));
  cpu::add_sigmoid_gated(x, y, gate);
}

}  // namespace strata::backend
