#!/usr/bin/env python3
"""Trains the strata-demo byte-level BPE tokenizer (HF `tokenizers`) on the rendered corpus and
tokenizes the corpus for training.

  make_tokenizer.py train CORPUS OUT_DIR    tokenizer.json + tokenizer_config.json (6144 ids: 6135
                                            learned + the 9 Qwen3.5 added tokens at the end)
  make_tokenizer.py encode CORPUS TOK_DIR OUT.npz   token ids of every conversation (+ <|endoftext|>)

Pipeline as in Qwen3.5 (docs/MODEL_SPEC.md §7): NFC, the Qwen3.5 split regex (Isolated), ByteLevel
without prefix space or regex, BPE without unk/byte fallback, ByteLevel decoder.
"""
import json
import lzma
import os
import re
import sys

import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ADDED_TOKENS, SPLIT_REGEX, VOCAB_SIZE, write_json  # noqa: E402

_ADDED_RE = re.compile("|".join(re.escape(c) for c, _ in ADDED_TOKENS))


def read_corpus(path):
    with lzma.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def new_tokenizer():
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    return tok


def train(corpus, out_dir):
    tok = new_tokenizer()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE - len(ADDED_TOKENS), min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[],
                                  show_progress=False)

    def pieces():  # the added tokens never take part in merges
        for row in read_corpus(corpus):
            for piece in _ADDED_RE.split(row["text"]):
                if piece:
                    yield piece

    tok.train_from_iterator(pieces(), trainer=trainer)
    assert tok.get_vocab_size() == VOCAB_SIZE - len(ADDED_TOKENS), tok.get_vocab_size()
    tok.add_special_tokens([AddedToken(c, special=True, normalized=False) for c, s in ADDED_TOKENS if s])
    tok.add_tokens([AddedToken(c, special=False, normalized=False) for c, s in ADDED_TOKENS if not s])
    ids = [tok.token_to_id(c) for c, _ in ADDED_TOKENS]
    assert ids == list(range(VOCAB_SIZE - len(ADDED_TOKENS), VOCAB_SIZE)), ids
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"), pretty=True)
    write_json(os.path.join(out_dir, "tokenizer_config.json"), {
        "add_bos_token": False, "add_prefix_space": False, "bos_token": None, "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "unk_token": None, "clean_up_tokenization_spaces": False,
        "errors": "replace", "model_max_length": 4096, "split_special_tokens": False,
        "tokenizer_class": "PreTrainedTokenizerFast"})
    print(f"tokenizer: {tok.get_vocab_size()} ids, added {dict(zip([c for c, _ in ADDED_TOKENS], ids))}")


def encode(corpus, tok_dir, out_path):
    tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    eot = tok.token_to_id("<|endoftext|>")
    rows = list(read_corpus(corpus))
    kinds = sorted({r["kind"] for r in rows})
    kind_index = {k: i for i, k in enumerate(kinds)}
    encoded = tok.encode_batch([r["text"] for r in rows], add_special_tokens=False)
    lengths = np.array([len(e.ids) + 1 for e in encoded], dtype=np.int32)
    tokens = np.empty(int(lengths.sum()), dtype=np.uint16)
    pos = 0
    for e in encoded:
        n = len(e.ids)
        tokens[pos:pos + n] = e.ids
        tokens[pos + n] = eot
        pos += n + 1
    np.savez(out_path, tokens=tokens, lengths=lengths,
             kinds=np.array([kind_index[r["kind"]] for r in rows], dtype=np.int16), kind_names=np.array(kinds))
    chars = sum(len(r["text"]) for r in rows)
    print(f"encoded {len(rows)} conversations: {tokens.size} tokens ({chars / tokens.size:.2f} chars/token), "
          f"longest {lengths.max()}, mean {lengths.mean():.0f}")


if __name__ == "__main__":
    if sys.argv[1] == "train":
        train(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "encode":
        encode(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
