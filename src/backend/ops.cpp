// Device dispatch for the op interface: every op checks where its tensors live and calls that
// backend. Only the CPU backend exists in this build unless STRATA_CUDA is on.
#include "backend/ops.h"

#include <cstring>

#include "backend/cpu/cpu_ops.h"
#include "backend/dispatch.h"
#ifdef STRATA_HAVE_CUDA
#include "backend/cuda/cuda_ops.h"
#endif

namespace strata::backend {

using detail::require_cpu;
namespace {
void require_f32(const char* op, const Tensor& t) { detail::require_f32(op, {&t}); }
}  // namespace

void embedding(const Weight& table, std::span<const int32_t> ids, const Tensor& out) {
  require_cpu("embedding", {&table.w, &out});
  require_f32("embedding", out);
  check(out.dim(0) == static_cast<int64_t>(ids.size()) && out.dim(1) == table.cols(),
        ErrorKind::kInternal, "embedding: output shape {} for {} ids of width {}", out.shape.str(),
        ids.size(), table.cols());
  for (int32_t id : ids) {
    check(id >= 0 && id < table.rows(), ErrorKind::kInvalidInput,
          "token id {} is outside the vocabulary (size {})", id, table.rows());
  }
  cpu::embedding(table, ids, out);
}

void matmul(const Tensor& x, const Weight& w, const Tensor& out) {
#ifdef STRATA_HAVE_CUDA
  if (x.device == Device::kCuda && w.w.device == Device::kCuda && out.device == Device::kCuda) {
    require_f32("matmul", x);
    require_f32("matmul", out);
    check(x.dim(-1) == w.cols() && out.dim(-1) == w.rows() && x.numel() / x.dim(-1) == out.numel() / out.dim(-1),
          ErrorKind::kInternal, "matmul: x {} · w [{}, {}] -> out {}", x.shape.str(), w.rows(), w.cols(),
          out.shape.str());
    check(!w.quantized() || ((w.bits == 4 || w.bits == 8) &&
                             (w.group_size == 32 || w.group_size == 64 || w.group_size == 128) &&
                             w.scales.device == Device::kCuda && w.biases.device == Device::kCuda &&
                             w.scales.dtype == DType::kF32 && w.biases.dtype == DType::kF32),
          ErrorKind::kUnsupported, "CUDA matmul: {}-bit weights with groups of {} are not supported",
          w.bits, w.group_size);
    cuda::matmul(x, w, out);
    return;
  }
#endif
  require_cpu("matmul", {&x, &w.w, &out});
  require_f32("matmul", x);
  require_f32("matmul", out);
  check(x.dim(-1) == w.cols() && out.dim(-1) == w.rows() && x.numel() / x.dim(-1) == out.numel() / out.dim(-1),
        ErrorKind::kInternal, "matmul: x {} · w [{}, {}] -> out {}", x.shape.str(), w.rows(), w.cols(),
        out.shape.str());
  cpu::matmul(x, w, out);
}

void add_bias(const Tensor& x, const Tensor& bias) {
  require_cpu("add_bias", {&x, &bias});
  check(bias.numel() == x.dim(-1), ErrorKind::kInternal, "add_bias: bias {} for x {}", bias.shape.str(),
        x.shape.str());
  cpu::add_bias(x, bias);
}

void rms_norm(const Tensor& x, const Tensor& w, float eps, bool one_plus_w, const Tensor& out) {
  check(w.numel() == x.dim(-1) && out.numel() == x.numel(), ErrorKind::kInternal,
        "rms_norm: x {} w {} out {}", x.shape.str(), w.shape.str(), out.shape.str());
#ifdef STRATA_HAVE_CUDA
  if (x.device == Device::kCuda && w.device == Device::kCuda && out.device == Device::kCuda) {
    cuda::rms_norm(x, w, eps, one_plus_w, out);
    return;
  }
#endif
  require_cpu("rms_norm", {&x, &w, &out});
  cpu::rms_norm(x, w, eps, one_plus_w, out);
}

void rope(const Tensor& x, std::span<const int32_t> positions, const RopeParams& params) {
  require_cpu("rope", {&x});
  check(x.rank() == 3 && x.dim(0) == static_cast<int64_t>(positions.size()) &&
            params.rotary_dim <= x.dim(2) && params.rotary_dim % 2 == 0 &&
            static_cast<int>(params.inv_freq.size()) == params.rotary_dim / 2,
        ErrorKind::kInternal, "rope: x {} with {} positions, rotary_dim {}", x.shape.str(),
        positions.size(), params.rotary_dim);
  cpu::rope(x, positions, params);
}

void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t start_pos,
               float scale, int64_t window, const Tensor& out) {
  require_cpu("attention", {&q, &k_cache, &v_cache, &out});
  check(q.rank() == 3 && k_cache.rank() == 3 && q.dim(2) == k_cache.dim(2) &&
            q.dim(1) % k_cache.dim(1) == 0 && start_pos + q.dim(0) <= k_cache.dim(0) &&
            k_cache.shape == v_cache.shape && out.shape == q.shape,
        ErrorKind::kInternal, "attention: q {} cache {} start {}", q.shape.str(), k_cache.shape.str(),
        start_pos);
  cpu::attention(q, k_cache, v_cache, start_pos, scale, window, out);
}

void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  require_cpu("silu_mul", {&gate, &up, &out});
  check(gate.numel() == up.numel() && gate.numel() == out.numel(), ErrorKind::kInternal,
        "silu_mul: shapes {} {} {}", gate.shape.str(), up.shape.str(), out.shape.str());
  cpu::silu_mul(gate, up, out);
}

void add(const Tensor& a, const Tensor& b) {
  require_cpu("add", {&a, &b});
  check(a.numel() == b.numel(), ErrorKind::kInternal, "add: shapes {} {}", a.shape.str(), b.shape.str());
  cpu::add(a, b);
}

void copy_rows(const Tensor& src, const Tensor& dst, int64_t dst_row) {
  require_cpu("copy_rows", {&src, &dst});
  check(src.dtype == dst.dtype && src.numel() / std::max<int64_t>(src.dim(0), 1) ==
                                      dst.numel() / std::max<int64_t>(dst.dim(0), 1) &&
            dst_row >= 0 && dst_row + src.dim(0) <= dst.dim(0),
        ErrorKind::kInternal, "copy_rows: src {} into dst {} at row {}", src.shape.str(),
        dst.shape.str(), dst_row);
  cpu::copy_rows(src, dst, dst_row);
}

void zero(const Tensor& x) {
  require_cpu("zero", {&x});
  std::memset(x.data, 0, x.nbytes());
}

void sigmoid_mul(const Tensor& x, const Tensor& gate, const Tensor& out) {
  require_cpu("sigmoid_mul", {&x, &gate, &out});
  check(x.numel() == gate.numel() && x.numel() == out.numel(), ErrorKind::kInternal, "sigmoid_mul: shapes {} {} {}",
        x.shape.str(), gate.shape.str(), out.shape.str());
  cpu::sigmoid_mul(x, gate, out);
}

void split_columns(const Tensor& x, std::span<const Tensor> outs) {
  require_cpu("split_columns", {&x});
  int64_t width = 0;
  for (const Tensor& o : outs) {
    require_cpu("split_columns", {&o});
    check(o.rank() == 2 && o.dim(0) == x.dim(0) && o.dtype == x.dtype, ErrorKind::kInternal,
          "split_columns: output {} for x {}", o.shape.str(), x.shape.str());
    width += o.dim(1);
  }
  check(x.rank() == 2 && width == x.dim(1), ErrorKind::kInternal, "split_columns: widths sum to {} for x {}", width,
        x.shape.str());
  cpu::split_columns(x, outs);
}

}  // namespace strata::backend
