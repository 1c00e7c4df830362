// Shape checks and device dispatch for the Gated DeltaNet ops (backend/gdn.h).
#include "backend/gdn.h"

#include "backend/cpu/cpu_ops.h"
#include "backend/dispatch.h"
#include "backend/memory.h"
#include "backend/ops.h"

namespace strata::backend {

using detail::placement;
using detail::require_f32;

void causal_conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& window, const Tensor& out) {
  const Device d = placement("causal_conv1d_silu", {&x, &weight, &window, &out});
  require_f32("causal_conv1d_silu", {&x, &weight, &window, &out});
  check(x.rank() == 2 && weight.rank() == 2 && weight.dim(0) == x.dim(1) && window.rank() == 2 &&
            window.dim(0) == weight.dim(1) - 1 && window.dim(1) == x.dim(1) && out.shape == x.shape &&
            out.data != x.data,
        ErrorKind::kInternal, "causal_conv1d_silu: x {} weight {} window {} out {}", x.shape.str(),
        weight.shape.str(), window.shape.str(), out.shape.str());
  STRATA_CUDA_DISPATCH("causal_conv1d_silu", d, cuda::causal_conv1d_silu(x, weight, window, out));
  cpu::causal_conv1d_silu(x, weight, window, out);
}

void gdn_gates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, const Tensor& g,
               const Tensor& beta) {
  const Device d = placement("gdn_gates", {&a, &b, &a_log, &dt_bias, &g, &beta});
  require_f32("gdn_gates", {&a, &b, &a_log, &dt_bias, &g, &beta});
  const int64_t Hv = a_log.numel();
  check(Hv > 0 && dt_bias.numel() == Hv && a.dim(-1) == Hv && b.shape == a.shape && g.shape == a.shape &&
            beta.shape == a.shape,
        ErrorKind::kInternal, "gdn_gates: a {} b {} A_log {} dt_bias {}", a.shape.str(), b.shape.str(),
        a_log.shape.str(), dt_bias.shape.str());
  STRATA_CUDA_DISPATCH("gdn_gates", d, cuda::gdn_gates(a, b, a_log, dt_bias, g, beta));
  cpu::gdn_gates(a, b, a_log, dt_bias, g, beta);
}

void l2_norm(const Tensor& x, float eps, float scale, const Tensor& out) {
  const Device d = placement("l2_norm", {&x, &out});
  require_f32("l2_norm", {&x, &out});
  check(out.numel() == x.numel(), ErrorKind::kInternal, "l2_norm: x {} out {}", x.shape.str(), out.shape.str());
  STRATA_CUDA_DISPATCH("l2_norm", d, cuda::l2_norm(x, eps, scale, out));
  cpu::l2_norm(x, eps, scale, out);
}

namespace {

// The shape checks of each step of the mixer's core, shared by its op and by gdn_core.
Device check_prepare(const Tensor& qkv, const Tensor& conv_weight, const Tensor& window, const Tensor& a,
                     const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, const Tensor& q, const Tensor& k,
                     const Tensor& v, const Tensor& g, const Tensor& beta) {
  const Device d = placement("gdn_prepare", {&qkv, &conv_weight, &window, &a, &b, &a_log, &dt_bias, &q, &k, &v, &g,
                                             &beta});
  require_f32("gdn_prepare", {&qkv, &conv_weight, &window, &a, &b, &a_log, &dt_bias, &q, &k, &v, &g, &beta});
  check(qkv.rank() == 2 && q.rank() == 3 && v.rank() == 3, ErrorKind::kInternal, "gdn_prepare: qkv {} q {} v {}",
        qkv.shape.str(), q.shape.str(), v.shape.str());
  const int64_t T = qkv.dim(0), C = qkv.dim(1), Hk = q.dim(1), dk = q.dim(2), Hv = v.dim(1), dv = v.dim(2);
  const bool ok = T > 0 && q.dim(0) == T && k.shape == q.shape && v.dim(0) == T && C == 2 * Hk * dk + Hv * dv &&
                  conv_weight.rank() == 2 && conv_weight.dim(0) == C && window.rank() == 2 &&
                  window.dim(0) == conv_weight.dim(1) - 1 && window.dim(1) == C && a.shape == Shape{T, Hv} &&
                  b.shape == a.shape && g.shape == a.shape && beta.shape == a.shape && a_log.numel() == Hv &&
                  dt_bias.numel() == Hv && Hk > 0 && Hv % Hk == 0;
  check(ok, ErrorKind::kInternal, "gdn_prepare: qkv {} conv {} window {} a {} q {} k {} v {} g {}", qkv.shape.str(),
        conv_weight.shape.str(), window.shape.str(), a.shape.str(), q.shape.str(), k.shape.str(), v.shape.str(),
        g.shape.str());
  check(d != Device::kCuda || (conv_weight.dim(1) >= 2 && conv_weight.dim(1) <= 8 && dk <= 256 && dv <= 256),
        ErrorKind::kUnsupported, "CUDA gdn_prepare: conv width {} (2 to 8), head dims {} and {} (up to 256)",
        conv_weight.dim(1), dk, dv);
  return d;
}

Device check_delta(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                   const Tensor& state, const Tensor& out) {
  const Device d = placement("gated_delta_rule", {&q, &k, &v, &g, &beta, &state, &out});
  require_f32("gated_delta_rule", {&q, &k, &v, &g, &beta, &state, &out});
  const bool ok = q.rank() == 3 && k.shape == q.shape && v.rank() == 3 && v.dim(0) == q.dim(0) &&
                  v.dim(1) % q.dim(1) == 0 && g.rank() == 2 && g.dim(0) == q.dim(0) && g.dim(1) == v.dim(1) &&
                  beta.shape == g.shape && state.rank() == 3 && state.dim(0) == v.dim(1) &&
                  state.dim(1) == v.dim(2) && state.dim(2) == q.dim(2) && out.shape == v.shape;
  check(ok, ErrorKind::kInternal, "gated_delta_rule: q {} k {} v {} g {} state {} out {}", q.shape.str(),
        k.shape.str(), v.shape.str(), g.shape.str(), state.shape.str(), out.shape.str());
  return d;
}

Device check_norm_gated(const Tensor& x, const Tensor& w, const Tensor& z, const Tensor& out) {
  const Device d = placement("rms_norm_gated", {&x, &w, &z, &out});
  require_f32("rms_norm_gated", {&x, &w, &z, &out});
  check(x.dim(-1) == w.numel() && z.numel() == x.numel() && out.numel() == x.numel(), ErrorKind::kInternal,
        "rms_norm_gated: x {} w {} z {} out {}", x.shape.str(), w.shape.str(), z.shape.str(), out.shape.str());
  return d;
}

}  // namespace

void gdn_prepare(const Tensor& qkv, const Tensor& conv_weight, const Tensor& window, const Tensor& a,
                 const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, float l2_eps, float q_scale,
                 const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta) {
  const Device d = check_prepare(qkv, conv_weight, window, a, b, a_log, dt_bias, q, k, v, g, beta);
  STRATA_CUDA_DISPATCH("gdn_prepare", d,
                       cuda::gdn_prepare(qkv, conv_weight, window, a, b, a_log, dt_bias, l2_eps, q_scale, q, k, v, g,
                                         beta));
  cpu::gdn_prepare(qkv, conv_weight, window, a, b, a_log, dt_bias, l2_eps, q_scale, q, k, v, g, beta);
}

void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      const Tensor& state, const Tensor& out, DeltaRuleForm form) {
  const Device d = check_delta(q, k, v, g, beta, state, out);
  STRATA_CUDA_DISPATCH("gated_delta_rule", d, cuda::gated_delta_rule(q, k, v, g, beta, state, out, form));
  cpu::gated_delta_rule(q, k, v, g, beta, state, out, form);
}

void rms_norm_gated(const Tensor& x, const Tensor& w, const Tensor& z, float eps, const Tensor& out) {
  const Device d = check_norm_gated(x, w, z, out);
  STRATA_CUDA_DISPATCH("rms_norm_gated", d, cuda::rms_norm_gated(x, w, z, eps, out));
  cpu::rms_norm_gated(x, w, z, eps, out);
}

namespace {
// The three checks share q (prepare and delta) and o (delta and norm), so together they place
// every tensor of the core on one device, which they return.
Device check_core(const GdnCore& c, const Tensor& y) {
  const Device d =
      check_prepare(c.qkv, c.conv_weight, c.window, c.a, c.b, c.a_log, c.dt_bias, c.q, c.k, c.v, c.g, c.beta);
  check_delta(c.q, c.k, c.v, c.g, c.beta, c.state, c.o);
  check_norm_gated(c.o.reshaped({c.o.numel() / c.v.dim(2), c.v.dim(2)}), c.norm, c.z, y);
  return d;
}
}  // namespace

void gdn_core_rows(const GdnCore& c, std::span<const Tensor> windows, std::span<const Tensor> states,
                   const Tensor& y) {
  const int64_t T = c.qkv.dim(0);
  check(static_cast<int64_t>(windows.size()) == T && static_cast<int64_t>(states.size()) == T, ErrorKind::kInternal,
        "gdn_core_rows: {} rows, {} windows, {} states", T, windows.size(), states.size());
  // Row t of the step against sequence t's state.
  auto row = [&](int64_t t) {
    GdnCore one = c;
    for (Tensor* r : {&one.qkv, &one.z, &one.a, &one.b, &one.q, &one.k, &one.v, &one.g, &one.beta, &one.o})
      *r = r->rows(t, t + 1);
    one.window = windows[static_cast<size_t>(t)];
    one.state = states[static_cast<size_t>(t)];
    return one;
  };
  if (T == 0) return;
  const Device d = check_core(row(0), y.rows(0, 1));
  for (int64_t t = 1; t < T; ++t) {
    const Tensor& w = windows[static_cast<size_t>(t)];
    const Tensor& s = states[static_cast<size_t>(t)];
    check(w.device == d && s.device == d && w.dtype == windows[0].dtype && s.dtype == states[0].dtype &&
              w.shape == windows[0].shape && s.shape == states[0].shape,
          ErrorKind::kInternal, "gdn_core_rows: sequence {}'s window or state differs from the first's", t);
  }
#ifdef STRATA_HAVE_CUDA
  if (d == Device::kCuda) {
    const detail::CudaOpTimer timer("gdn_core_rows");
    if (cuda::gdn_core_rows(c, windows, states, y)) return;
  }
#endif
  for (int64_t t = 0; t < T; ++t) gdn_core(row(t), y.rows(t, t + 1));
}

void gdn_core_positions(const GdnCore& c, std::span<const Tensor> after_windows,
                        std::span<const Tensor> after_states, const Tensor& y) {
  const int64_t T = c.qkv.dim(0);
  check(T >= 1 && static_cast<int64_t>(after_windows.size()) >= T - 1 &&
            static_cast<int64_t>(after_states.size()) >= T - 1,
        ErrorKind::kInternal, "gdn_core_positions: {} positions, {} windows, {} states after them", T,
        after_windows.size(), after_states.size());
  auto row = [&](int64_t t) {
    GdnCore one = c;
    for (Tensor* r : {&one.qkv, &one.z, &one.a, &one.b, &one.q, &one.k, &one.v, &one.g, &one.beta, &one.o})
      *r = r->rows(t, t + 1);
    one.form = DeltaRuleForm::kRecurrent;  // one token, as a decode step
    return one;
  };
  const Device d = check_core(row(0), y.rows(0, 1));
  for (int64_t t = 0; t + 1 < T; ++t) {
    const Tensor& w = after_windows[static_cast<size_t>(t)];
    const Tensor& s = after_states[static_cast<size_t>(t)];
    check(w.device == d && s.device == d && w.dtype == c.window.dtype && s.dtype == c.state.dtype &&
              w.shape == c.window.shape && s.shape == c.state.shape,
          ErrorKind::kInternal, "gdn_core_positions: the state after position {} differs from the sequence's", t);
  }
#ifdef STRATA_HAVE_CUDA
  if (d == Device::kCuda) {
    const detail::CudaOpTimer timer("gdn_core_positions");
    if (cuda::gdn_core_positions(c, after_windows, after_states, y)) return;
  }
#endif
  // Position by position on the sequence's own window and state, each copied after its position.
  // The copies are queued transfers, never kernels: a GPU's one-token core reads the window and
  // state before it waits for the kernel ahead of it (backend/cuda/launch.h), which is safe only
  // when something that waits for every earlier kernel lies between two cores of a layer.
  for (int64_t t = 0; t < T; ++t) {
    gdn_core(row(t), y.rows(t, t + 1));
    if (t + 1 == T) break;
    copy_queued(c.window, after_windows[static_cast<size_t>(t)]);
    copy_queued(c.state, after_states[static_cast<size_t>(t)]);
  }
}

void gdn_core(const GdnCore& c, const Tensor& y, MatmulFeed* feed) {
  const Device d = check_core(c, y);
  const Tensor o_rows = c.o.reshaped({c.o.numel() / c.v.dim(2), c.v.dim(2)});
  STRATA_CUDA_DISPATCH("gdn_core", d, cuda::gdn_core(c, y, feed));
  MatmulFeed::none(feed);
  cpu::gdn_prepare(c.qkv, c.conv_weight, c.window, c.a, c.b, c.a_log, c.dt_bias, c.l2_eps, c.q_scale, c.q, c.k, c.v,
                   c.g, c.beta);
  cpu::gated_delta_rule(c.q, c.k, c.v, c.g, c.beta, c.state, c.o, c.form);
  cpu::rms_norm_gated(o_rows, c.norm, c.z, c.norm_eps, y);
}

}  // namespace strata::backend
