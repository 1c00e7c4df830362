"""Faster drop-ins for two of transformers' reference GDN functions, used only for training speed
(the GPU machine has neither flash-linear-attention nor causal-conv1d). Same math, fewer kernels:

- chunk_gated_delta_rule: some transformers releases build the chunk's UT transform
  (I + βKKᵀ⊙Γ)⁻¹ with a 63-step Python loop of small kernels per layer and pass; this solves the
  same triangular system with one batched torch.linalg.solve_triangular (the form newer releases
  use), otherwise the same chunked algorithm (docs/MODEL_SPEC.md §1.7);
- causal_conv1d_fn: the depthwise causal conv (kernel 4) as four shifted multiply-adds instead of
  a grouped F.conv1d, whose backward is slow for thousands of channels.

Goldens are always made with transformers' own, unpatched code.
"""
import inspect

import torch
import torch.nn.functional as F


def _l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def chunk_gated_delta_rule(query, key, value, g, beta, chunk_size=64, initial_state=None, output_final_state=False,
                           use_qk_l2norm_in_kernel=False, **kwargs):
    """query, key [B, T, Hk, dk]; value [B, T, Hv, dv]; g, beta [B, T, Hv] -> ([B, T, Hv, dv], state)."""
    dtype = query.dtype
    batch, length, k_heads, dk = key.shape
    v_heads, dv = value.shape[-2:]
    if k_heads != v_heads:
        query, key = (x.repeat_interleave(v_heads // k_heads, dim=2) for x in (query, key))
    q, k, v, beta, g = (x.transpose(1, 2).float().contiguous() for x in (query, key, value, beta, g))
    if use_qk_l2norm_in_kernel:
        q, k = _l2norm(q), _l2norm(k)
    q = q * dk ** -0.5
    pad = (-length) % chunk_size
    q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    beta, g = (F.pad(x, (0, pad)) for x in (beta, g))
    n = (length + pad) // chunk_size
    q, k, v = (x.reshape(batch, v_heads, n, chunk_size, -1) for x in (q, k, v))
    beta, g = (x.reshape(batch, v_heads, n, chunk_size) for x in (beta, g))

    cum = g.cumsum(-1)
    upper = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=q.device).triu(1)
    decay = (cum.unsqueeze(-1) - cum.unsqueeze(-2)).masked_fill(upper, float("-inf")).exp()
    k_beta = k * beta.unsqueeze(-1)
    system = (k_beta @ k.transpose(-1, -2)) * decay  # unit lower triangular once the diagonal reads as 1
    new_values = torch.linalg.solve_triangular(system, v * beta.unsqueeze(-1), upper=False, unitriangular=True)
    k_cumdecay = torch.linalg.solve_triangular(system, k_beta * cum.exp().unsqueeze(-1), upper=False,
                                               unitriangular=True)
    intra = (q @ k.transpose(-1, -2)) * decay
    q = q * cum.exp().unsqueeze(-1)
    k = k * (cum[..., -1:] - cum).exp().unsqueeze(-1)
    chunk_decay = cum[..., -1].exp()[..., None, None]

    state = (torch.zeros(batch, v_heads, dk, dv, dtype=torch.float32, device=q.device)
             if initial_state is None else initial_state.float())
    outs = []
    for i in range(n):
        v_new = new_values[:, :, i] - k_cumdecay[:, :, i] @ state
        outs.append(q[:, :, i] @ state + intra[:, :, i] @ v_new)
        state = state * chunk_decay[:, :, i] + k[:, :, i].transpose(-1, -2) @ v_new
    out = torch.stack(outs, dim=2).reshape(batch, v_heads, -1, dv)[:, :, :length]
    return out.transpose(1, 2).contiguous().to(dtype), (state if output_final_state else None)


def causal_conv1d_fn(hidden_states, weight, bias=None, activation=None, **kwargs):
    """hidden_states [B, C, T], weight [C, K] -> silu(causal depthwise conv) [B, C, T]."""
    length, width = hidden_states.shape[-1], weight.shape[-1]
    x = F.pad(hidden_states.to(weight.dtype), (width - 1, 0))
    out = x[..., 0:length] * weight[:, 0, None]
    for j in range(1, width):
        out = out + x[..., j:j + length] * weight[:, j, None]
    if bias is not None:
        out = out + bias[:, None]
    if activation is not None:
        out = F.silu(out)
    return out.to(hidden_states.dtype)


def _source(fn):
    try:
        return inspect.getsource(fn)
    except (TypeError, OSError):
        return ""


def install(model):
    """Uses the fast versions in transformers' Qwen3.5 module where it would run its own loop-based
    or grouped-conv reference code. Returns a line saying what was done."""
    from transformers.models.qwen3_5 import modeling_qwen3_5 as mod
    done = []
    chunk = getattr(mod, "torch_chunk_gated_delta_rule", None)
    if chunk is not None and "solve_triangular" not in _source(chunk):
        mod.torch_chunk_gated_delta_rule = chunk_gated_delta_rule
        for m in model.modules():
            if getattr(m, "chunk_gated_delta_rule", None) is chunk:
                m.chunk_gated_delta_rule = chunk_gated_delta_rule
        done.append("chunk rule -> solve_triangular version")
    else:
        done.append("chunk rule: transformers' own (solve_triangular)" if chunk is not None else "chunk rule: not found")
    conv = getattr(mod, "causal_conv1d_fn", None)
    if conv is not None and "F.conv1d" in _source(conv):
        mod.causal_conv1d_fn = causal_conv1d_fn
        for m in model.modules():
            if getattr(m, "causal_conv1d_fn", None) is conv:
                m.causal_conv1d_fn = causal_conv1d_fn
        done.append("causal conv -> shifted multiply-adds")
    else:
        done.append(f"causal conv: kept ({getattr(conv, '__module__', None)})")
    return "GDN: " + "; ".join(done)
