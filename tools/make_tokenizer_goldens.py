#!/usr/bin/env python3
"""Makes the tokenizer goldens in tests/fixtures/tokenizers/{qwen3,llama3,gemma3}.json.

Each golden is a JSON list of {"text", "ids", "decoded", "add_special_tokens"}: the ids Hugging Face
`tokenizers` gives for `text` (Tokenizer.encode(text, add_special_tokens=...)) and its decoding of
those ids (Tokenizer.decode(ids, skip_special_tokens=False)). The inputs are
tools/tokenizer_strings.json (made by tools/make_tokenizer_strings.py): every "plain" string without
special tokens, and the "add_special_tokens" strings with them.

Needs the `tokenizers` package (the GPU machine has it; this one does not). Usage:
  python3 tools/make_tokenizer_goldens.py --tokenizers DIR --out DIR [--strings FILE] [names...]
where DIR/<name>/tokenizer.json exists for each name (default: qwen3 llama3 gemma3), e.g.
../shared/fixtures/tokenizers.
"""

import argparse
import json
import sys
from pathlib import Path


def make_golden(tokenizer_path: Path, plain: list[str], with_special: list[str]) -> list[dict]:
    from tokenizers import Tokenizer  # imported here so that --help works without it

    tok = Tokenizer.from_file(str(tokenizer_path))
    cases = []
    for add_special, texts in ((False, plain), (True, with_special)):
        for text in texts:
            ids = tok.encode(text, add_special_tokens=add_special).ids
            cases.append({
                "text": text,
                "ids": ids,
                "decoded": tok.decode(ids, skip_special_tokens=False),
                "add_special_tokens": add_special,
            })
    return cases


def write_golden(path: Path, cases: list[dict]) -> None:
    # One case per line: small diffs when the strings change, still a plain JSON list.
    lines = [json.dumps(c, ensure_ascii=False) for c in cases]
    path.write_text("[\n" + ",\n".join(lines) + "\n]\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizers", required=True, help="folder with <name>/tokenizer.json")
    parser.add_argument("--out", required=True, help="where <name>.json goes")
    parser.add_argument("--strings", default=str(Path(__file__).with_name("tokenizer_strings.json")))
    parser.add_argument("names", nargs="*", default=["qwen3", "llama3", "gemma3"])
    args = parser.parse_args()

    import tokenizers

    strings = json.loads(Path(args.strings).read_text(encoding="utf-8"))
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"tokenizers {tokenizers.__version__}, python {sys.version.split()[0]}")
    for name in args.names:
        cases = make_golden(Path(args.tokenizers) / name / "tokenizer.json", strings["plain"],
                            strings["add_special_tokens"])
        path = out_dir / f"{name}.json"
        write_golden(path, cases)
        print(f"{name}: {len(cases)} cases, {path.stat().st_size} bytes -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
