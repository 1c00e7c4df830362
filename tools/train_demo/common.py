"""Shared definitions of the strata-demo recipe: special tokens, the Qwen3.5 split regex, the two
model shapes, and file helpers. Imported by the tokenizer, training and golden scripts."""
import json
import os

SEED = 1234
VOCAB_SIZE = 6144

# The Qwen3.5 pre-tokenizer split (docs/MODEL_SPEC.md §7).
SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
               r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# (content, special): appended after the learned BPE vocabulary, as in Qwen's tokenizer.json.
ADDED_TOKENS = [("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
                ("<think>", False), ("</think>", False), ("<tool_call>", False), ("</tool_call>", False),
                ("<tool_response>", False), ("</tool_response>", False)]

# Qwen3.5 text models: 3 GDN + 1 gated-attention layers per group, partial rotary 0.25, tied embeddings.
MODEL_SHAPES = {
    "strata-demo": dict(hidden_size=384, intermediate_size=640, num_hidden_layers=8,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                        linear_num_key_heads=2, linear_num_value_heads=4,
                        linear_key_head_dim=64, linear_value_head_dim=64),
    "strata-demo-draft": dict(hidden_size=128, intermediate_size=384, num_hidden_layers=4,
                              num_attention_heads=2, num_key_value_heads=1, head_dim=64,
                              linear_num_key_heads=1, linear_num_value_heads=2,
                              linear_key_head_dim=64, linear_value_head_dim=64),
}
MAX_POSITIONS = 4096
ROPE = {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25}


def token_ids(tokenizer):
    """name -> id for the added tokens of a `tokenizers.Tokenizer`."""
    return {content: tokenizer.token_to_id(content) for content, _ in ADDED_TOKENS}


def text_config(name, ids):
    from transformers import Qwen3_5TextConfig
    return Qwen3_5TextConfig(vocab_size=VOCAB_SIZE, **MODEL_SHAPES[name], linear_conv_kernel_dim=4,
                             max_position_embeddings=MAX_POSITIONS, rms_norm_eps=1e-6,
                             full_attention_interval=4, tie_word_embeddings=True, rope_parameters=dict(ROPE),
                             bos_token_id=None, eos_token_id=ids["<|im_end|>"],
                             pad_token_id=ids["<|endoftext|>"])


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def here(*parts):
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), *parts)
