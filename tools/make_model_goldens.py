#!/usr/bin/env python3
"""Makes tiny random-weight checkpoints and reference outputs with Hugging Face transformers.

Run on the GPU machine (it has torch + transformers); everything runs on the CPU so the references are
deterministic: dense models in float32, the Qwen3.5 hybrids in float64 (from the same fp32 weights). For each model it writes, under OUT/<name>/:
  config.json, model.safetensors            the checkpoint exactly as transformers saves it
  golden.safetensors                        prompt_ids [T] I32, prompt_logits [T, V] F32,
                                            greedy_ids [G] I32, greedy_logits [G, V] F32
greedy_logits[i] are the logits that chose greedy_ids[i] (full re-forward each step, no cache).

Usage: python3 tools/make_model_goldens.py OUT [name ...]
"""
import json
import os
import sys
import traceback

import torch
from safetensors.torch import save_file

SEED = 1234
GREEDY_STEPS = 32


def perturb(model, seed):
    """Gives every parameter an O(1)-activation random init so greedy choices are well separated."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim >= 2 and "conv1d" not in name:
                fan_in = p.shape[-1]
                std = 1.0 if "embed_tokens" in name else fan_in ** -0.5
                p.copy_(torch.randn(p.shape, generator=g) * std)
            elif name.endswith("A_log"):
                # decay rates exp(A_log)·softplus(·) of about 0.01-1 per token: the state then holds
                # many tokens, so no head's output is a single near-zero (k·q)·v that the gated
                # RMSNorm would blow up (an ill-conditioned reference that no quantized model can meet)
                p.copy_(torch.log(torch.rand(p.shape, generator=g) * 0.5 + 0.02))
            elif name.endswith("dt_bias"):
                p.copy_(torch.rand(p.shape, generator=g) * 2 - 1)
            elif "conv1d" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
            elif "norm" in name:
                # zero-centred (1 + w) norms are stored around 0, plain ones around 1; both get noise
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
            else:  # biases
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)


def run_reference(model, vocab, prompt_len, seed, exact=False):
    """exact: evaluate in float64 (the fp32 chunked delta rule alone is off by ~1e-4)."""
    g = torch.Generator().manual_seed(seed + 1)
    prompt = torch.randint(0, vocab, (prompt_len,), generator=g)
    if exact:
        model = model.to(torch.float64)
        # grouped_mm (the default MoE backend) has no float64 kernel; the eager loop does
        if hasattr(model, "set_experts_implementation"):
            model.set_experts_implementation("eager")
        else:
            model.config._experts_implementation = "eager"
    with torch.no_grad():
        prompt_logits = model(prompt[None]).logits[0].float()
        ids = prompt.clone()
        greedy, greedy_logits = [], []
        for _ in range(GREEDY_STEPS):
            logits = model(ids[None]).logits[0, -1].float()
            nxt = int(torch.argmax(logits))
            greedy.append(nxt)
            greedy_logits.append(logits)
            ids = torch.cat([ids, torch.tensor([nxt])])
    return {
        "prompt_ids": prompt.to(torch.int32),
        "prompt_logits": prompt_logits.contiguous(),
        "greedy_ids": torch.tensor(greedy, dtype=torch.int32),
        "greedy_logits": torch.stack(greedy_logits).contiguous(),
    }


def save_model(model, out_dir, dtype):
    os.makedirs(out_dir, exist_ok=True)
    model.config.torch_dtype = dtype
    state = {k: v.to(dtype) for k, v in model.state_dict().items()}
    model.save_pretrained(out_dir, state_dict=state, safe_serialization=True)


def dense_specs():
    from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                              Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)
    common = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                  rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2)
    return {
        # GQA, untied, llama3 rope scaling
        "llama": (LlamaForCausalLM, LlamaConfig(**common, tie_word_embeddings=False, rope_theta=10000.0,
                  rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 64}),
                  torch.float32),
        # qkv biases, tied embeddings, yarn rope scaling
        "qwen2": (Qwen2ForCausalLM, Qwen2Config(**common, tie_word_embeddings=True, rope_theta=10000.0,
                  rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}),
                  torch.float32),
        # q/k norm, explicit head_dim != hidden/heads, untied
        "qwen3": (Qwen3ForCausalLM, Qwen3Config(**common, head_dim=32, tie_word_embeddings=False,
                  rope_theta=1000000.0), torch.float32),
        # linear rope scaling, stored as bf16
        "mistral": (MistralForCausalLM, MistralConfig(**common, tie_word_embeddings=False, rope_theta=10000.0,
                    sliding_window=None, rope_scaling={"rope_type": "linear", "factor": 2.0}),
                    torch.bfloat16),
    }


def hybrid_specs():
    specs = {}
    common_text = dict(vocab_size=256, hidden_size=64, num_hidden_layers=8, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
                       linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4,
                       max_position_embeddings=512, rms_norm_eps=1e-6, full_attention_interval=4,
                       bos_token_id=1, eos_token_id=2)
    try:
        from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
        rope = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}
        specs["qwen35"] = (Qwen3_5ForCausalLM, Qwen3_5TextConfig(
            **common_text, intermediate_size=128, tie_word_embeddings=False, rope_parameters=rope), torch.float32)
        specs["qwen35_tied"] = (Qwen3_5ForCausalLM, Qwen3_5TextConfig(
            **common_text, intermediate_size=128, tie_word_embeddings=True, rope_parameters=rope), torch.float32)
    except Exception:
        traceback.print_exc()
    try:
        from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig
        specs["qwen35_moe"] = (Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig(
            **common_text, moe_intermediate_size=32, shared_expert_intermediate_size=48, num_experts=8,
            num_experts_per_tok=2, tie_word_embeddings=False,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}),
            torch.float32)
    except Exception:
        traceback.print_exc()
    try:
        from transformers import Qwen3NextConfig, Qwen3NextForCausalLM
        specs["qwen3_next"] = (Qwen3NextForCausalLM, Qwen3NextConfig(
            **common_text, intermediate_size=128, moe_intermediate_size=32, shared_expert_intermediate_size=48,
            num_experts=8, num_experts_per_tok=2, decoder_sparse_step=1, norm_topk_prob=True, mlp_only_layers=[1],
            tie_word_embeddings=False, rope_theta=10000.0, partial_rotary_factor=0.25), torch.float32)
    except Exception:
        traceback.print_exc()
    return specs


def main():
    out = sys.argv[1]
    only = set(sys.argv[2:])
    torch.manual_seed(SEED)
    torch.set_num_threads(8)
    report = {}
    for group, prompt_len, specs_fn in (("dense", 64, dense_specs), ("hybrid", 100, hybrid_specs)):
        for i, (name, (cls, config, dtype)) in enumerate(specs_fn().items()):
            if only and name not in only:
                continue
            try:
                torch.manual_seed(SEED + i)
                model = cls(config).eval()
                perturb(model, SEED + 17 * i)
                if dtype != torch.float32:
                    # The reference runs on exactly the stored values. Round parameters only:
                    # module.to() would also round buffers such as the RoPE inv_freq.
                    with torch.no_grad():
                        for p in model.parameters():
                            p.copy_(p.to(dtype).to(torch.float32))
                golden = run_reference(model, config.vocab_size, prompt_len, SEED + i, exact=group == "hybrid")
                model = model.to(torch.float32)
                d = os.path.join(out, name)
                save_model(model, d, dtype)
                save_file(golden, os.path.join(d, "golden.safetensors"))
                n_params = sum(p.numel() for p in model.parameters())
                report[name] = {"params": n_params, "greedy": golden["greedy_ids"].tolist(),
                                "keys": sorted(k for k, _ in model.state_dict().items())[:60]}
                print(f"{name}: {n_params} params, greedy {golden['greedy_ids'].tolist()}", flush=True)
            except Exception as e:
                traceback.print_exc()
                report[name] = {"error": repr(e)}
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
