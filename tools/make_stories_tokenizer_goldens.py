#!/usr/bin/env python3
"""Makes tests/fixtures/tokenizers/stories260k.json: reference ids for the stories260K vocabulary.

The reference is llama2.c's run.c `encode()` (karpathy/llama2.c), transcribed to Python step by
step and run on the llama2.c tokenizer file tok512.bin (not on the GGUF that strata reads):
  1. if the text is not empty, start with the token " " (the SentencePiece dummy prefix);
  2. one token per UTF-8 code point; a code point that is not a token becomes its bytes, each as
     token (byte + 3), i.e. <0xNN>;
  3. repeatedly merge the adjacent pair whose concatenated text is a token with the highest
     score (the leftmost such pair on ties), until no pair is a token.
No BOS/EOS are added. "decoded" is the input itself: SentencePiece decoding ("▁" -> " ", byte
tokens joined, the dummy-prefix space dropped, as Hugging Face's Llama tokenizer decodes) gives the
text back for these strings. (tok512.nf.model beside the model is a minbpe file with a different
vocabulary, not this tokenizer's SentencePiece model, so it is not used.)

Usage: python3 tools/make_stories_tokenizer_goldens.py --tok512 PATH [--out PATH]
"""

import argparse
import json
import struct
from pathlib import Path

STRINGS = [
    "Once upon a time",
    "Once upon a time, there was a little girl named Lily.",
    "She loved to play outside in the sun.",
    "Tim and his mom went to the park. They saw a big dog!",
    '"Can I have it?" asked Timmy. "Yes," said Mom.',
    "The end.",
    "hello",
    "Hello world",
    "a",
    "I",
    " ",
    "  two leading spaces",
    "trailing space ",
    "many     spaces     here",
    "line one\nline two",
    "tab\there",
    "The year 2024, 3.14 and 100%.",
    "Lily's friend's toy wasn't there.",
    "caf\u00e9 na\u00efve",
    "\u65e5\u672c\u8a9e",
    "emoji \U0001F642!",
    "\u2014 em dash \u2013 en dash \u2026",
    "\u201cquoted\u201d \u2018single\u2019",
    "UPPER CASE WORDS",
    "supercalifragilistic",
    "{[(<>)]} #$%^&*_+=|\\~`",
    "They played and played until the sun went down. Then they went home happy.",
    "One day, a happy little bird flew over the big tree and said hello to the sky.",
]


def read_tok512(path: Path) -> tuple[list[bytes], list[float]]:
    data = path.read_bytes()
    offset = 4  # int max_token_length
    pieces, scores = [], []
    while offset < len(data):
        score, length = struct.unpack_from("<fi", data, offset)
        offset += 8
        pieces.append(data[offset:offset + length])
        offset += length
        scores.append(score)
    return pieces, scores


def encode(text: str, pieces: list[bytes], scores: list[float]) -> list[int]:
    lookup = {p: i for i, p in enumerate(pieces)}
    tokens = []
    if text:
        tokens.append(lookup[b" "])
    for ch in text:
        b = ch.encode("utf-8")
        if b in lookup:
            tokens.append(lookup[b])
        else:
            tokens.extend(x + 3 for x in b)
    while True:
        best_score, best_id, best_idx = -1e10, -1, -1
        for i in range(len(tokens) - 1):
            merged = lookup.get(pieces[tokens[i]] + pieces[tokens[i + 1]], -1)
            if merged != -1 and scores[merged] > best_score:
                best_score, best_id, best_idx = scores[merged], merged, i
        if best_idx == -1:
            break
        tokens[best_idx:best_idx + 2] = [best_id]
    return tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tok512", required=True, help="llama2.c tokenizer file tok512.bin")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "tests" /
                                             "fixtures" / "tokenizers" / "stories260k.json"))
    args = parser.parse_args()
    pieces, scores = read_tok512(Path(args.tok512))
    cases = [{"text": s, "ids": encode(s, pieces, scores), "decoded": s,
              "add_special_tokens": False} for s in STRINGS]
    lines = [json.dumps(c, ensure_ascii=False) for c in cases]
    Path(args.out).write_text("[\n" + ",\n".join(lines) + "\n]\n", encoding="utf-8")
    print(f"wrote {len(cases)} cases to {args.out}")


if __name__ == "__main__":
    main()
