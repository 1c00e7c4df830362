#!/usr/bin/env python3
"""Writes tools/tokenizer_strings.json: the inputs of the tokenizer goldens.

Deterministic (fixed seed, no input files): the same strings on every run. The list covers what
tokenizers get wrong: code, CJK, Arabic, Hindi, emoji (ZWJ sequences, flags, skin tones), combining
marks, whitespace runs, special tokens written inline, long words, numbers, URLs, mixed scripts,
and the empty string. tools/make_tokenizer_goldens.py encodes them with Hugging Face `tokenizers`.

Usage: python3 tools/make_tokenizer_strings.py [--out tools/tokenizer_strings.json]
"""

import argparse
import json
import random
from pathlib import Path

ENGLISH = [
    "Hello world",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "It's a truth universally acknowledged, that a single man in possession of a good fortune, "
    "must be in want of a wife.",
    "I'm sure you'll see they've done what we'd said.",
    "DON'T SHOUT! I'LL HEAR YOU'RE THERE'S",
    "Mr. O'Neil's cat -- a tabby -- wasn't amused.",
    "  Leading spaces",
    "Trailing spaces   ",
    "multiple   spaces   between   words",
    "Sentence one. Sentence two! Sentence three? And... four",
    '"Quoted text," she said, \'and more.\'',
    "e.g. i.e. etc. vs. a.m. p.m.",
    "UPPERCASE lowercase MiXeD CaSe camelCase snake_case kebab-case",
    "Once upon a time, there was a little girl named Lily. She loved to play outside.",
    "The year 2024 was followed by 2025; prices rose 3.5% to $1,234.56.",
    "What's the difference between 'its' and 'it's'?",
    "hello\nworld",
    "hello\n\nworld",
    "line one\r\nline two\r\n",
    "tab\tseparated\tvalues",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
    "supercalifragilisticexpialidocious",
    "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
]

CODE = [
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "#include <iostream>\nint main() { std::cout << \"hi\\n\"; return 0; }",
    "const x = arr.map((v, i) => v * i).filter(Boolean);",
    "if x == 1:\n        pass\n    elif x != 2:\n        raise ValueError('bad')",
    '{"name": "strata", "version": [0, 1, 0], "ok": true, "none": null}',
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "git commit -m \"fix: handle empty input\" && git push origin main",
    "    indented by four\n        by eight\n\t\tby two tabs",
    "x+=1;y-=2;z*=3;w/=4;v%=5;u**=6;t//=7",
    "template <typename T> constexpr T max(T a, T b) noexcept { return a < b ? b : a; }",
    "<div class=\"row\"><span id='x'>&amp; &lt;tag&gt;</span></div>",
    "fn main() { let v: Vec<u8> = vec![0xDE, 0xAD, 0xBE, 0xEF]; println!(\"{:?}\", v); }",
    "$ ls -la /usr/include | grep -E '^d' | wc -l",
    "// comment\n/* block\n   comment */\n# hash comment\n-- sql comment",
    "a = [[1, 2], [3, 4]]\nprint(a[0][1], a[-1][-1])",
    "lambda x: x**2 + 2*x + 1",
    "@decorator\nclass Foo(Bar, metaclass=Meta):\n    __slots__ = ('a', 'b')",
    "regex = r'^(?P<key>[A-Za-z_]\\w*)\\s*=\\s*(?P<val>.*)$'",
    "0x1F 0b1010 0o755 1_000_000 3.14e-10 .5 5. 1e+308",
]

CJK = [
    "你好，世界！",
    "我爱自然语言处理。今天天气很好。",
    "日本語のテキストです。カタカナとひらがなと漢字。",
    "東京は日本の首都です",
    "안녕하세요, 세계! 한국어 텍스트입니다.",
    "中文English混合mixed文本text",
    "「引用」と『二重引用』、それから（括弧）。",
    "１２３４５６７８９０ ＡＢＣ ｱｲｳｴｵ",  # full-width and half-width forms
    "繁體中文與简体中文",
    "ㄅㄆㄇㄈ 注音符號",
]

OTHER_SCRIPTS = [
    "مرحبا بالعالم",
    "اللغة العربية جميلة جدا، أليس كذلك؟",
    "שלום עולם",
    "नमस्ते दुनिया",
    "हिन्दी भाषा में लिखा गया वाक्य।",
    "Привет, мир! Как дела?",
    "Γειά σου Κόσμε",
    "สวัสดีชาวโลก",
    "ሰላም ልዑል",
    "Բարեւ աշխարհ",
    "გამარჯობა მსოფლიო",
    "வணக்கம் உலகம்",
    "Xin chào thế giới! Tiếng Việt có dấu.",
    "Zażółć gęślą jaźń",
    "Ærøskøbing Straße Œuvre façade naïve coöperate",
    "İstanbul'da ılık bir gün",
]

EMOJI = [
    "🙂",
    "I love pizza 🍕🍕🍕!",
    "👨‍👩‍👧‍👦 family",
    "👩🏽‍💻 coder, 🧑🏿‍🚀 astronaut",
    "🇺🇸🇯🇵🇫🇷🇩🇪 flags",
    "🏳️‍🌈 🏴‍☠️",
    "👍🏻👍🏼👍🏽👍🏾👍🏿",
    "1️⃣ 2️⃣ #️⃣ *️⃣",
    "❤️ ♥ ❤ 💔",
    "🤖🦾🧠💡🚀✨",
    "emoji at end 😀",
    "😀start",
    "mid😀dle",
    "\U0001F600\U0001F601\U0001F602\U0001F923\U0001F603",
]

COMBINING = [
    "e\u0301",
    "re\u0301sume\u0301",
    "a\u0300" * 8,
    "n\u0303o\u0308u\u0308",
    "Z\u0351\u0364\u036b\u0343a\u0310\u0367l\u0357g\u0350o\u0306",  # zalgo
    "\u0915\u094d\u0937",  # Devanagari conjunct
    "\u1100\u1161\u11a8",  # Hangul jamo
    "caf\u00e9 vs cafe\u0301",
    "\u212b \u00c5 A\u030a",  # angstrom sign, precomposed, decomposed
    "\ufb01 \ufb02 \u2126 \u00b5",  # ligatures, ohm, micro
]

SPECIAL_INLINE = [
    "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are helpful.<|im_end|>",
    "text<|endoftext|>more text",
    "<think>\nreasoning here\n</think>\n\nanswer",
    "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<|begin_of_text|>Hello",
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
    "<bos>text<eos>",
    "a<|im_end|>b<|im_start|>c",
    " <|im_start|> spaced <|im_end|> ",
    "<|im_start|><|im_end|><|endoftext|>",
    "<|im_start",
    "im_start|>",
    "<|not_a_token|>",
    "<|reserved_special_token_5|>",
    "<s> </s> <unk> <pad> <mask>",
    "<0x41> literal byte token text",
    "\u2581 literal metaspace \u2581\u2581",
    "Ġ and Ċ as literal characters",
]

NUMBERS_URLS = [
    "1",
    "12",
    "123",
    "1234",
    "12345678901234567890",
    "3.14159265358979323846",
    "-42 +17 1,000,000 1.000.000,00",
    "2024-01-15T10:30:00Z",
    "Call +1 (555) 123-4567 or 555.123.4567",
    "https://www.example.com/path/to/page?query=value&other=123#anchor",
    "http://localhost:8080/v1/chat/completions",
    "user.name+tag@example.co.uk",
    "ftp://files.example.org/pub/archive.tar.gz",
    "192.168.0.1 and ::1 and 2001:db8::ff00:42:8329",
    "v1.2.3-beta.4+build.567",
    "1st 2nd 3rd 4th 21st 100th",
    "½ ¾ ⅓ ² ³ ⁴ ₁ ₂ Ⅻ ⑦",
    "٠١٢٣٤٥٦٧٨٩ ०१२३४५६७८९",
]

WHITESPACE = [
    "",
    " ",
    "  ",
    "\n",
    "\t",
    "\r\n",
    " \n",
    "\n ",
    "\n\n\n",
    "\t\t\t",
    " " * 16,
    " " * 33,
    "\n" * 12,
    " \t \t \n \r\n  \t",
    "word" + " " * 7 + "word",
    "word\t \tword",
    "a\u00a0b\u2003c\u3000d",  # no-break, em and ideographic spaces
    "\u200b\u200c\u200d zero width",
    "end with newline\n",
    "   \n   \n   ",
]


def long_strings(rng: random.Random) -> list[str]:
    out = [
        "a" * 300,
        "ab" * 150,
        "xyz" * 100 + " " + "xyz" * 50,
        "The " * 80,
        "9" * 120,
        "😀" * 40,
        "中" * 100,
        "-" * 80 + "\n" + "=" * 80,
        "https://example.com/" + "/".join(f"segment{i}" for i in range(40)),
        "".join(chr(0x61 + (i * 7) % 26) for i in range(400)),
    ]
    letters = "abcdefghijklmnopqrstuvwxyz"
    for _ in range(5):
        out.append("".join(rng.choice(letters) for _ in range(rng.randint(60, 200))))
    return out


def random_mixes(rng: random.Random, pools: list[list[str]], count: int) -> list[str]:
    out = []
    seps = ["", " ", "\n", "  ", "\t", ", ", " - ", "\n\n"]
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(2, 4)):
            pool = rng.choice(pools)
            text = rng.choice(pool)
            if len(text) > 60:
                start = rng.randint(0, len(text) - 30)
                text = text[start:start + rng.randint(10, 40)]
            parts.append(text)
            parts.append(rng.choice(seps))
        out.append("".join(parts[:-1]))
    return out


def random_unicode(rng: random.Random, count: int) -> list[str]:
    """Random code points from assorted blocks (no surrogates, no noncharacters)."""
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
              (0x900, 0x97F), (0xE00, 0xE7F), (0x1F300, 0x1F64F), (0x3040, 0x30FF),
              (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0x2000, 0x206F), (0x300, 0x36F)]
    out = []
    for _ in range(count):
        chars = []
        for _ in range(rng.randint(1, 24)):
            lo, hi = rng.choice(blocks)
            chars.append(chr(rng.randint(lo, hi)))
        out.append("".join(chars))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).with_name("tokenizer_strings.json")))
    args = parser.parse_args()
    rng = random.Random(20251121)

    pools = [ENGLISH, CODE, CJK, OTHER_SCRIPTS, EMOJI, COMBINING, SPECIAL_INLINE, NUMBERS_URLS,
             WHITESPACE]
    plain = []
    for pool in pools:
        plain.extend(pool)
    plain.extend(long_strings(rng))
    plain.extend(random_mixes(rng, pools, 100))
    plain.extend(random_unicode(rng, 40))
    # Keep order, drop repeats.
    seen = set()
    plain = [s for s in plain if not (s in seen or seen.add(s))]

    with_special = [
        "",
        "Hello world",
        " leading space",
        "<|im_start|>user\nHi<|im_end|>",
        "<bos>already has bos",
        "<|begin_of_text|>already has bos",
        "日本語 and emoji 🙂",
        "code:\n\tx = 1\n",
    ]

    data = {
        "comment": "Inputs of the tokenizer goldens; generated by tools/make_tokenizer_strings.py.",
        "plain": plain,
        "add_special_tokens": with_special,
    }
    Path(args.out).write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n",
                              encoding="utf-8")
    print(f"wrote {len(plain)} + {len(with_special)} strings to {args.out}")


if __name__ == "__main__":
    main()
