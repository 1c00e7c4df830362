#!/usr/bin/env python3
"""Trains one strata-demo model from scratch with transformers' Qwen3_5ForCausalLM on the GPU.

One conversation per row (right-padded, so no attention mask is needed and every conversation
starts at position 0 as at inference), rows grouped by length into batches of about
--batch-tokens tokens, next-token loss on every real token (padding ignored). AdamW, bf16
autocast over fp32 master weights, linear warm-up then cosine decay over a fixed wall-clock
budget (--seconds): training stops when the budget is spent, so the call cannot overrun.
Saves the model as bf16 safetensors with the tokenizer, chat template and generation config.

Usage: train.py NAME DATA.npz TOKENIZER_DIR OUT_DIR --seconds S [--lr LR] [--batch-tokens N]
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fast_gdn  # noqa: E402
from common import SEED, VOCAB_SIZE, here, text_config, write_json  # noqa: E402

MAX_LEN = 1024
VALIDATION_CONVERSATIONS = 1000


class Batches:
    """Length-grouped batches of whole conversations, built on the GPU from one token buffer."""

    def __init__(self, data, device, batch_tokens, rng):
        self.tokens = torch.from_numpy(data["tokens"].astype(np.int64)).to(device)
        self.lengths = np.minimum(data["lengths"].astype(np.int64), MAX_LEN)
        self.offsets = np.concatenate([[0], np.cumsum(data["lengths"].astype(np.int64))[:-1]])
        self.device, self.batch_tokens, self.rng = device, batch_tokens, rng
        order = rng.permutation(len(self.lengths))
        self.validation, self.train = order[:VALIDATION_CONVERSATIONS], order[VALIDATION_CONVERSATIONS:]
        self.epoch = 0

    def make(self, rows):
        """input ids [B, L] and targets [B, L] (-100 where ignored) for conversation indices `rows`."""
        lengths = self.lengths[rows]
        width = int(math.ceil(lengths.max() / 64) * 64)
        pos = torch.arange(width + 1, device=self.device)
        start = torch.from_numpy(self.offsets[rows]).to(self.device)
        n = torch.from_numpy(lengths).to(self.device)
        index = (start[:, None] + pos[None, :]).clamp(max=self.tokens.numel() - 1)
        full = self.tokens[index]
        inside = pos[None, :] < n[:, None]
        full = torch.where(inside, full, torch.full_like(full, -100))
        x = full[:, :-1].clamp(min=0)  # padding reads token 0; its outputs are never used
        return x, full[:, 1:]

    def groups(self, indices, shuffle):
        """Sorts each block of 8192 conversations by length and cuts it into batches whose padded
        size (rows x longest row, rounded up to 64) stays within the token budget."""
        out = []
        for m in range(0, len(indices), 8192):
            chunk = indices[m:m + 8192]
            chunk = chunk[np.argsort(self.lengths[chunk], kind="stable")]
            start = 0
            for i in range(len(chunk)):
                width = int(math.ceil(self.lengths[chunk[i]] / 64) * 64)
                if i > start and (i - start + 1) * width > self.batch_tokens:
                    out.append(chunk[start:i])
                    start = i
            out.append(chunk[start:])
        if shuffle:
            self.rng.shuffle(out)
        return out

    def __iter__(self):
        while True:
            for rows in self.groups(self.rng.permutation(self.train), shuffle=True):
                yield (*self.make(rows), int((self.lengths[rows] - 1).sum()))
            self.epoch += 1


def profile_steps(model, opt, batches, name):
    """Prints where 3 training steps spend GPU time (for the recipe notes; not part of training)."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _, (x, y, _) in zip(range(3), batches):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    logits = model(input_ids=x, use_cache=False).logits
                F.cross_entropy(logits.float().view(-1, VOCAB_SIZE), y.reshape(-1), ignore_index=-100).backward()
                opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
        print(f"[{name}] profile of 3 steps:\n" + prof.key_averages().table(sort_by="self_cuda_time_total",
                                                                         row_limit=15, max_name_column_width=60),
              flush=True)
    except Exception as e:  # the profile is only informative
        print(f"[{name}] profiling failed: {e}", flush=True)


def lr_at(progress, peak, warmup=0.04, floor=0.1):
    if progress < warmup:
        return peak * progress / warmup
    p = min(1.0, (progress - warmup) / (1 - warmup))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * p)))


def evaluate(model, batches):
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad(), torch.autocast(batches.device.split(":")[0], dtype=torch.bfloat16):
        for rows in batches.groups(batches.validation, shuffle=False):
            x, y = batches.make(rows)
            logits = model(input_ids=x, use_cache=False).logits.float()
            total += F.cross_entropy(logits.view(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100,
                                     reduction="sum").item()
            count += int((y != -100).sum())
    model.train()
    return total / count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("data")
    ap.add_argument("tokenizer_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--batch-tokens", type=int, default=65536)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--profile", action="store_true", help="print the top GPU kernels of 3 steps")
    args = ap.parse_args()

    from tokenizers import Tokenizer
    from transformers import Qwen3_5ForCausalLM

    torch.manual_seed(SEED)
    torch.cuda.manual_seed_all(SEED)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    device = args.device
    cuda = device.startswith("cuda")
    tok = Tokenizer.from_file(os.path.join(args.tokenizer_dir, "tokenizer.json"))
    ids = {c: tok.token_to_id(c) for c in ("<|endoftext|>", "<|im_end|>")}
    config = text_config(args.name, ids)
    model = Qwen3_5ForCausalLM(config).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    data = np.load(args.data)
    batches = Batches(data, device, args.batch_tokens, np.random.default_rng(SEED))
    probe = batches.make(batches.validation[:8])[0]
    with torch.no_grad():
        before = model(input_ids=probe, use_cache=False).logits.float()
        line = fast_gdn.install(model)
        after = model(input_ids=probe, use_cache=False).logits.float()
    print(f"[{args.name}] {n_params / 1e6:.2f}M parameters; {line}; max |dlogit| against transformers' own "
          f"code {(after - before).abs().max().item():.2e}", flush=True)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, **({"fused": True} if cuda else {}))

    log, losses = [], []
    step, seen = 0, 0
    if cuda:
        torch.cuda.synchronize()
    t0 = time.time()
    for x, y, n_targets in batches:
        elapsed = time.time() - t0
        if elapsed >= args.seconds:
            break
        lr = lr_at(elapsed / args.seconds, args.lr)
        for group in opt.param_groups:
            group["lr"] = lr
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16):
            logits = model(input_ids=x, use_cache=False).logits
        loss = F.cross_entropy(logits.float().view(-1, VOCAB_SIZE), y.reshape(-1), ignore_index=-100)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        seen += n_targets
        if step == 30 and args.profile:
            profile_steps(model, opt, batches, args.name)
        if step % 10 == 0:
            losses.append(loss.item())
            entry = {"step": step, "seconds": round(time.time() - t0, 1), "loss": round(losses[-1], 4),
                     "lr": round(lr, 6), "tokens": seen, "epoch": batches.epoch}
            log.append(entry)
            if step % 50 == 0:
                print(f"[{args.name}] {json.dumps(entry)} {seen / (time.time() - t0) / 1e3:.0f}k tok/s", flush=True)
    train_seconds = time.time() - t0
    val_loss = evaluate(model, batches)
    final_loss = float(np.mean(losses[-10:])) if losses else loss.item()
    print(f"[{args.name}] done: {step} steps, {seen / 1e6:.1f}M tokens, {train_seconds:.0f}s, "
          f"train loss {final_loss:.4f}, validation loss {val_loss:.4f}", flush=True)

    os.makedirs(args.out_dir, exist_ok=True)
    model = model.to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    model.save_pretrained(args.out_dir)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(args.tokenizer_dir, name), os.path.join(args.out_dir, name))
    shutil.copy(here("chat_template.jinja"), os.path.join(args.out_dir, "chat_template.jinja"))
    import transformers
    write_json(os.path.join(args.out_dir, "generation_config.json"), {
        "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]], "pad_token_id": ids["<|endoftext|>"],
        "do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95,
        "transformers_version": transformers.__version__})
    write_json(os.path.join(args.out_dir, "train_log.json"), {
        "name": args.name, "parameters": n_params, "steps": step, "train_tokens": seen,
        "epochs": batches.epoch + 1, "train_seconds": round(train_seconds, 1), "final_train_loss": final_loss,
        "validation_loss": val_loss, "lr": args.lr, "batch_tokens": args.batch_tokens,
        "gpu": torch.cuda.get_device_name() if cuda else device, "torch": torch.__version__, "transformers": transformers.__version__,
        "log": log})


if __name__ == "__main__":
    main()
