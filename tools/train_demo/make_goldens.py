#!/usr/bin/env python3
"""Greedy goldens for a trained strata-demo model, made with transformers' own Qwen3_5ForCausalLM.

For each chat prompt below: the prompt rendered with chat_template.jinja (checked against
transformers' apply_chat_template), its token ids from the model's tokenizer.json (HF
`tokenizers`, checked against AutoTokenizer), and the first GREEDY tokens of transformers'
greedy continuation (argmax, own token fed back, not stopped at end-of-turn). Runs on the CPU in
float64 from the stored bf16 weights, so the reference is exact up to float64 rounding; each
step's top-1 minus top-2 logit margin is recorded, and a single cache-free forward over the whole
sequence must give the same argmaxes as the cached steps. `reply` is the greedy reply up to
<|im_end|> (at most MAX_REPLY tokens), for the documentation.

Usage: make_goldens.py MODEL_DIR OUT.json
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_corpus import GET_FORTUNE, LOOKUP_WORD, WEATHER_TOOLS  # noqa: E402
from render import load_template, render  # noqa: E402

GREEDY = 64
MAX_REPLY = 200
GET_WEATHER = WEATHER_TOOLS[0][0]

CASES = [
    ("thinking_definition", [{"role": "user", "content": "What does the word \"harbor\" mean?"}], None, {}),
    ("no_thinking_quote", [{"role": "user", "content": "Tell me a quote about science."}], None,
     {"enable_thinking": False}),
    ("tool_call_weather", [{"role": "user", "content": "What's the weather like in Paris?"}],
     [GET_WEATHER, LOOKUP_WORD], {}),
    ("tool_response_weather", [
        {"role": "user", "content": "What's the weather like in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": json.dumps({"city": "Paris", "temperature": 21, "unit": "celsius",
                                                "condition": "sunny", "humidity": 40})}],
     [GET_WEATHER, LOOKUP_WORD], {}),
    ("tool_call_dictionary_no_thinking",
     [{"role": "user", "content": "Look up the word \"lantern\" in the dictionary."}], [LOOKUP_WORD, GET_FORTUNE],
     {"enable_thinking": False}),
    ("system_identity", [{"role": "system", "content": "You are a helpful assistant."},
                         {"role": "user", "content": "Hello! Who are you?"}], None, {}),
    ("arithmetic", [{"role": "user", "content": "What is 27 + 45?"}], None, {}),
    ("tool_call_fortune", [{"role": "user", "content": "Give me a fortune about computers."}], [GET_FORTUNE], {}),
    ("weather_without_tools_no_thinking", [{"role": "user", "content": "Is it raining in London?"}], None,
     {"enable_thinking": False}),
    ("multi_turn_jargon", [{"role": "user", "content": "Hi!"},
                           {"role": "assistant", "content": "Hello! How can I help you today?"},
                           {"role": "user", "content": "What is a kludge in hacker jargon?"}], None, {}),
]


def greedy(model, prompt, eos):
    """Cached greedy decoding: (tokens, per-step top-1 minus top-2 margins)."""
    tokens, margins = [], []
    with torch.no_grad():
        out = model(input_ids=torch.tensor([prompt]), use_cache=True)
        for _ in range(max(GREEDY, MAX_REPLY)):
            logits = out.logits[0, -1]
            top = torch.topk(logits, 2)
            tokens.append(int(top.indices[0]))
            margins.append(float(top.values[0] - top.values[1]))
            if len(tokens) >= GREEDY and eos in tokens:
                break
            out = model(input_ids=torch.tensor([[tokens[-1]]]), past_key_values=out.past_key_values, use_cache=True)
    return tokens, margins


def main(model_dir, out_path):
    import transformers
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer, Qwen3_5ForCausalLM

    torch.set_num_threads(int(os.environ.get("GOLDEN_THREADS", "6")))
    template = load_template(os.path.join(model_dir, "chat_template.jinja"))
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    hf_tok = AutoTokenizer.from_pretrained(model_dir)
    eos = tok.token_to_id("<|im_end|>")
    model = Qwen3_5ForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).to(torch.float64).eval()
    cases = []
    for name, messages, tools, kwargs in CASES:
        text = render(template, messages, tools, add_generation_prompt=True, **kwargs)
        hf_text = hf_tok.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False,
                                             **kwargs)
        ids = tok.encode(text, add_special_tokens=False).ids
        hf_ids = hf_tok(text, add_special_tokens=False)["input_ids"]
        out, margins = greedy(model, ids, eos)
        with torch.no_grad():  # the chunked (prefill) path must agree with the cached steps
            full = model(input_ids=torch.tensor([ids + out[:GREEDY - 1]]), use_cache=False).logits[0]
        no_cache = full[len(ids) - 1:].argmax(-1).tolist()
        reply = out[:out.index(eos) + 1] if eos in out else out
        case = {"name": name, "messages": messages, "tools": tools, "kwargs": kwargs, "prompt_text": text,
                "prompt_ids": ids, "greedy_ids": out[:GREEDY], "min_margin": round(min(margins[:GREEDY]), 6),
                "reply": tok.decode(reply, skip_special_tokens=False)}
        checks = {"hf_template_matches": hf_text == text, "hf_tokenizer_matches": hf_ids == ids,
                  "no_cache_agrees": no_cache == out[:GREEDY]}
        case["checks"] = checks
        cases.append(case)
        print(f"[{os.path.basename(model_dir)}] {name}: {len(ids)} prompt tokens, min margin "
              f"{case['min_margin']:.4f}, {checks}\n  reply: {case['reply']!r}", flush=True)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"model": os.path.basename(os.path.normpath(model_dir)),
                   "made_by": "tools/train_demo/make_goldens.py",
                   "reference": f"transformers {transformers.__version__} Qwen3_5ForCausalLM, torch {torch.__version__}, "
                                "float64 on the CPU from the stored bf16 weights",
                   "greedy_tokens": GREEDY, "cases": cases}, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
