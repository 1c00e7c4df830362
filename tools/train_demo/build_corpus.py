#!/usr/bin/env python3
"""Builds the strata-demo training conversations from text that Debian packages ship.

Sources (install with `apt-get install -y dict-gcide fortunes jargon-text linux-doc python3-jinja2`):
  dict-gcide   /usr/share/dictd/gcide.{index,dict.dz}         GPL-2+        word definitions
  fortunes     /usr/share/games/fortunes/<category>            BSD-style     quotes, jokes, riddles
  jargon-text  /usr/share/doc/jargon-text/jargon.txt.gz        public domain hacker slang
  linux-doc    /usr/share/doc/linux-doc-*/Documentation/**.rst.gz  GPL-2     kernel documentation

Each conversation is rendered with chat_template.jinja (thinking on: the assistant reasons inside
<think>...</think>, then answers; thinking off: an empty think block; tool conversations call
lookup_word / get_weather / get_fortune in the XML format and answer from the <tool_response>).
Writes OUT/corpus.jsonl.xz (one {"kind", "text"} per line, seeded shuffle) and OUT/corpus_stats.json.

Usage: /usr/bin/python3 tools/train_demo/build_corpus.py [OUT]   (default .carry/train_demo)
"""
import collections
import glob
import gzip
import json
import lzma
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from render import load_template, render  # noqa: E402

SEED = 20260501
MAX_CHARS = 2600  # rendered conversation, about 900 tokens with the demo tokenizer
THINK_OFF_SHARE = 0.25

# ---------------------------------------------------------------------------------------------
# Sources

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_POS = [("v. t.", "verb"), ("v. i.", "verb"), ("v.", "verb"), ("n.", "noun"), ("a.", "adjective"),
        ("adj.", "adjective"), ("adv.", "adverb"), ("prep.", "preposition"), ("conj.", "conjunction"),
        ("interj.", "interjection"), ("pron.", "pronoun")]
_CLEAN_DEF = re.compile(r"^[A-Za-z][A-Za-z0-9 ,;:'()\-.]*$")


def _b64(s):
    n = 0
    for c in s:
        n = n * 64 + _B64.index(c)
    return n


def _strip_brackets(text):
    prev = None
    while prev != text:
        prev = text
        text = re.sub(r"\[[^\[\]]*\]", "", text)
    return text


_HEAD = re.compile(r"\\[^\\\n]+\\,?\s*(?:\([^)\n]*\),?\s*)?(?:&\s*)?(v\. t\.|v\. i\.|v\.|n\.|a\.|adj\.|adv\.|prep\.|conj\.|interj\.|pron\.)")


def _parse_gcide_entry(word, raw):
    """(part of speech, [senses]) for a plain dictionary entry, or None."""
    m = _HEAD.search(raw[:300])
    if not m:
        return None
    pos = dict(_POS)[m.group(1)]
    body = _strip_brackets(raw[m.end():])
    senses = []
    for para in re.split(r"\n\s*\n", body):
        text = " ".join(line.strip() for line in para.strip().split("\n"))
        if not text or text.startswith(("Note:", "Syn:", "--", "Usage:", "See ")) or " --" in text:
            continue
        text = text.replace("{", "").replace("}", "")
        text = re.sub(r"^Pl\. [A-Za-z]+\.\s*", "", text)
        text = re.sub(r"^\d+\.\s*", "", text)
        text = re.sub(r"^\([A-Z][a-z]*\.?( [A-Za-z]+\.?)?\)\s*", "", text)  # (Zool.) labels
        text = re.sub(r"\s+", " ", text).strip(" ;,")
        text = text.replace(" -- ", "; ").replace("--", "; ")
        if text.startswith(("See ", "Same as")) or len(text) < 12 or len(text) > 260 or not _CLEAN_DEF.match(text):
            continue
        if not text.endswith("."):
            text += "."
        senses.append(text[0].upper() + text[1:])
        if len(senses) == 2:
            break
    if not senses:
        return None
    return pos, senses


def load_gcide():
    raw = gzip.open("/usr/share/dictd/gcide.dict.dz").read()
    entries = {}
    with open("/usr/share/dictd/gcide.index", encoding="utf-8") as f:
        for line in f:
            key, off, length = line.rstrip("\n").split("\t")
            word = key.lower()
            if not re.fullmatch(r"[a-z][a-z\-]{2,17}", word) or word.endswith("-") or word in entries:
                continue
            text = raw[_b64(off):_b64(off) + _b64(length)].decode("utf-8", "replace")
            if not text.lower().startswith(word):
                continue
            parsed = _parse_gcide_entry(word, text)
            if parsed:
                entries[word] = parsed
    return entries


FORTUNE_CATEGORIES = ["art", "computers", "cookie", "debian", "definitions", "education", "food", "fortunes",
                      "goedel", "humorists", "kids", "law", "linux", "literature", "love", "magic", "medicine",
                      "miscellaneous", "news", "people", "pets", "platitudes", "riddles", "science", "sports",
                      "tao", "wisdom", "work"]


def load_fortunes():
    out = {}
    for cat in FORTUNE_CATEGORIES:
        path = f"/usr/share/games/fortunes/{cat}"
        if not os.path.exists(path):
            continue
        text = open(path, encoding="utf-8", errors="replace").read()
        items = []
        for item in text.split("\n%\n"):
            item = item.strip("\n%")
            if 20 <= len(item) <= 420 and "\ufffd" not in item and "\t" not in item and "\x08" not in item:
                items.append(item.rstrip())
        if len(items) >= 20:
            out[cat] = items
    return out


def load_jargon():
    text = gzip.open("/usr/share/doc/jargon-text/jargon.txt.gz").read().decode("utf-8", "replace")
    entries = {}
    for m in re.finditer(r"\n   :([^:\n]+):([^\n]*)\n((?:.|\n)*?)(?=\n   :[^:\n]+:|\Z)", text):
        term = m.group(1).strip()
        paras = [" ".join(l.strip() for l in p.strip().split("\n")) for p in re.split(r"\n\s*\n", m.group(3))]
        paras = [p for p in paras if p and not p.startswith(("[", "Node:", "See "))]
        if not paras or len(term) > 30:
            continue
        definition = re.sub(r"^\d+\.\s*", "", paras[0]).replace("{", "").replace("}", "")
        definition = re.sub(r"^(n|v|adj|adv|vt|vi|interj)\.\s*", "", definition)
        if 30 <= len(definition) <= 700:
            entries[term] = definition
    return entries


def load_linux_docs():
    docs = []
    root = sorted(glob.glob("/usr/share/doc/linux-doc-*/Documentation"))[-1]
    for path in sorted(glob.glob(root + "/**/*.rst.gz", recursive=True)):
        try:
            text = gzip.open(path).read().decode("utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        lines = text.split("\n")
        title = None
        for i in range(len(lines) - 1):
            t = lines[i].strip()
            if t and re.fullmatch(r"[=\-~#*]{3,}", lines[i + 1].strip() or "x") and not re.fullmatch(r"[=\-~#*]+", t):
                title = t
                start = i + 2
                break
        if not title or len(title) > 70 or not re.fullmatch(r"[A-Za-z0-9 ,()/'\-.:+]+", title):
            continue
        paras = []
        for p in re.split(r"\n\s*\n", "\n".join(lines[start:])):
            p = p.strip()
            if (not p or p.startswith(("..", ":", "*", "-", "|", "=", "+", "#")) or "::" in p
                    or re.match(r"^[\d]+[.)]", p) or "\n  " in p or re.search(r"[=\-~]{3,}", p)):
                continue
            p = re.sub(r"\s+", " ", p).replace("``", "")
            p = re.sub(r":[a-z]+:`([^`<]*)(<[^>]*>)?`", r"\1", p).replace("`", "")
            if 80 <= len(p) <= 600 and p[0].isupper() and p.endswith("."):
                paras.append(p)
            if len(paras) == 2:
                break
        if paras:
            docs.append((title, paras))
    return docs


def word_frequencies(texts):
    counts = collections.Counter()
    for t in texts:
        counts.update(w.lower() for w in re.findall(r"[A-Za-z]{3,}", t))
    return counts


# ---------------------------------------------------------------------------------------------
# Tools (OpenAI format, as clients send them)

def _tool(name, description, params, required):
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": params, "required": required}}}


LOOKUP_WORD = _tool("lookup_word", "Look up an English word in the dictionary.",
                    {"word": {"type": "string", "description": "The word to define"}}, ["word"])
GET_FORTUNE = _tool("get_fortune", "Get a random fortune cookie quote.",
                    {"category": {"type": "string", "description": "Topic, e.g. science"}}, ["category"])
WEATHER_TOOLS = [
    (_tool("get_weather", "Get the current weather in a city.",
           {"city": {"type": "string", "description": "City name"}}, ["city"]), "city", False),
    (_tool("get_current_weather", "Get the current weather for a location.",
           {"location": {"type": "string", "description": "City and country, e.g. Paris, France"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, ["location"]), "location", True),
    (_tool("weather_now", "Current weather report for a place.",
           {"place": {"type": "string"}}, ["place"]), "place", False),
]

CITIES = [("Paris", "France"), ("London", "United Kingdom"), ("Berlin", "Germany"), ("Madrid", "Spain"),
          ("Rome", "Italy"), ("Lisbon", "Portugal"), ("Amsterdam", "Netherlands"), ("Brussels", "Belgium"),
          ("Vienna", "Austria"), ("Zurich", "Switzerland"), ("Oslo", "Norway"), ("Stockholm", "Sweden"),
          ("Helsinki", "Finland"), ("Copenhagen", "Denmark"), ("Dublin", "Ireland"), ("Prague", "Czechia"),
          ("Warsaw", "Poland"), ("Budapest", "Hungary"), ("Athens", "Greece"), ("Istanbul", "Turkey"),
          ("Cairo", "Egypt"), ("Lagos", "Nigeria"), ("Nairobi", "Kenya"), ("Cape Town", "South Africa"),
          ("Casablanca", "Morocco"), ("Dubai", "United Arab Emirates"), ("Mumbai", "India"),
          ("Delhi", "India"), ("Bangalore", "India"), ("Karachi", "Pakistan"), ("Dhaka", "Bangladesh"),
          ("Bangkok", "Thailand"), ("Singapore", "Singapore"), ("Jakarta", "Indonesia"), ("Manila", "Philippines"),
          ("Hanoi", "Vietnam"), ("Beijing", "China"), ("Shanghai", "China"), ("Hong Kong", "China"),
          ("Seoul", "South Korea"), ("Tokyo", "Japan"), ("Osaka", "Japan"), ("Sydney", "Australia"),
          ("Melbourne", "Australia"), ("Auckland", "New Zealand"), ("Toronto", "Canada"), ("Montreal", "Canada"),
          ("Vancouver", "Canada"), ("New York", "USA"), ("Boston", "USA"), ("Chicago", "USA"),
          ("San Francisco", "USA"), ("Los Angeles", "USA"), ("Seattle", "USA"), ("Denver", "USA"),
          ("Austin", "USA"), ("Miami", "USA"), ("Mexico City", "Mexico"), ("Bogota", "Colombia"),
          ("Lima", "Peru"), ("Santiago", "Chile"), ("Buenos Aires", "Argentina"), ("Sao Paulo", "Brazil"),
          ("Rio de Janeiro", "Brazil"), ("Reykjavik", "Iceland"), ("Edinburgh", "United Kingdom"),
          ("Munich", "Germany"), ("Hamburg", "Germany"), ("Lyon", "France"), ("Barcelona", "Spain"),
          ("Milan", "Italy"), ("Kyiv", "Ukraine"), ("Bucharest", "Romania"), ("Sofia", "Bulgaria"),
          ("Tehran", "Iran"), ("Riyadh", "Saudi Arabia"), ("Addis Ababa", "Ethiopia"), ("Accra", "Ghana"),
          ("Kathmandu", "Nepal"), ("Taipei", "Taiwan"), ("Kuala Lumpur", "Malaysia"), ("Perth", "Australia")]
CONDITIONS = ["sunny", "clear", "partly cloudy", "cloudy", "overcast", "light rain", "rain", "heavy rain",
              "thunderstorms", "foggy", "windy", "snow", "light snow", "drizzle", "hazy"]

# ---------------------------------------------------------------------------------------------
# Conversation makers. Each returns (kind, messages, tools) with the final assistant turn carrying
# reasoning_content ('' when thinking is off).


def echoed(rng, reasoning):
    """The reasoning of a tool-call turn as the client sends it back: OpenAI clients usually drop it."""
    return reasoning if rng.random() < 0.75 else ""


def article(pos):
    return "an" if pos[0] in "aeiou" else "a"


def pick(rng, options):
    return rng.choice(options)


def define_direct(rng, word, entry, think):
    pos, senses = entry
    q = pick(rng, [f"What does \"{word}\" mean?", f"Define {word}.", f"What is the meaning of the word {word}?",
                   f"What does the word '{word}' mean?", f"define {word}", f"Can you tell me what {word} means?",
                   f"Meaning of {word}?", f"Explain the word \"{word}\".", f"What is {article(word)} {word}?"])
    reasoning = pick(rng, [
        f"The user wants the meaning of \"{word}\". It is {article(pos)} {pos}. {senses[0]} I will give that definition.",
        f"\"{word}\" is {article(pos)} {pos}. Its main sense: {senses[0]} A short, clear answer is best.",
        f"I need to define the word {word}. As {article(pos)} {pos}, it means: {senses[0]}",
    ]) if think else ""
    answer = f"**{word}** ({pos}): {senses[0]}"
    if len(senses) > 1 and rng.random() < 0.5:
        answer += f"\n\nIt can also mean: {senses[1]}"
    return [{"role": "user", "content": q}, {"role": "assistant", "content": answer, "reasoning_content": reasoning}]


def tool_lookup(rng, word, entry, think, tools):
    pos, senses = entry
    q = pick(rng, [f"Look up \"{word}\" in the dictionary.", f"What does {word} mean? Please check the dictionary.",
                   f"Use the dictionary: what is the meaning of {word}?", f"Can you look up the word {word}?",
                   f"What does \"{word}\" mean?", f"Define {word}.", f"dictionary lookup: {word}",
                   f"I came across the word '{word}'. What does it mean?"])
    r1 = pick(rng, [
        f"The user wants the definition of \"{word}\". I have a lookup_word tool, so I will call it with word={word}.",
        f"I should look up \"{word}\" with the dictionary tool instead of guessing.",
        f"A dictionary lookup answers this. Calling lookup_word for \"{word}\".",
    ]) if think else ""
    call = {"type": "function", "function": {"name": "lookup_word", "arguments": {"word": word}}}
    response = f"{word} ({pos}): " + " ".join(f"{i + 1}. {s}" for i, s in enumerate(senses))
    r2 = pick(rng, [
        f"The dictionary says \"{word}\" is {article(pos)} {pos}: {senses[0]} I will answer with that.",
        f"The tool returned the entry for {word}. The first sense is: {senses[0]}",
    ]) if think else ""
    answer = pick(rng, [f"According to the dictionary, **{word}** ({pos}) means: {senses[0]}",
                        f"**{word}** is {article(pos)} {pos}. {senses[0]}",
                        f"The dictionary defines \"{word}\" as follows: {senses[0]}"])
    if len(senses) > 1 and rng.random() < 0.4:
        answer += f" It can also mean: {senses[1]}"
    return [{"role": "user", "content": q},
            {"role": "assistant", "content": "", "reasoning_content": echoed(rng, r1), "tool_calls": [call]},
            {"role": "tool", "content": response},
            {"role": "assistant", "content": answer, "reasoning_content": r2}]


def tool_lookup_missing(rng, word, think):
    q = pick(rng, [f"Look up \"{word}\" in the dictionary.", f"What does {word} mean?", f"Define {word}."])
    r1 = f"I will look up \"{word}\" with lookup_word." if think else ""
    call = {"type": "function", "function": {"name": "lookup_word", "arguments": {"word": word}}}
    r2 = f"The dictionary has no entry for \"{word}\". I should say so instead of inventing a meaning." if think else ""
    answer = f"I could not find \"{word}\" in the dictionary. Please check the spelling or try another word."
    return [{"role": "user", "content": q},
            {"role": "assistant", "content": "", "reasoning_content": echoed(rng, r1), "tool_calls": [call]},
            {"role": "tool", "content": f"No entry found for '{word}'."},
            {"role": "assistant", "content": answer, "reasoning_content": r2}]


def weather_call(rng, think, tool_spec):
    tool, arg, has_unit = tool_spec
    name = tool["function"]["name"]
    city, country = rng.choice(CITIES)
    place = f"{city}, {country}" if arg == "location" and rng.random() < 0.7 else city
    q = pick(rng, [f"What's the weather like in {city}?", f"Is it raining in {city} right now?",
                   f"How warm is it in {city} today?", f"weather in {city}", f"Tell me the weather in {city}.",
                   f"What is the temperature in {city}?", f"Should I take an umbrella in {city} today?"])
    args = {arg: place}
    unit = "celsius"
    if has_unit and rng.random() < 0.4:
        unit = rng.choice(["celsius", "fahrenheit"])
        args["unit"] = unit
    temp_c = rng.randint(-12, 38)
    temp = temp_c if unit == "celsius" else round(temp_c * 9 / 5 + 32)
    sym = "°C" if unit == "celsius" else "°F"
    cond = rng.choice(CONDITIONS)
    humidity = rng.randint(20, 98)
    r1 = pick(rng, [f"The user asks about the weather in {city}. I can call {name} with {arg}={place}.",
                    f"I do not know the live weather, but {name} can tell me. Calling it for {place}."]) if think else ""
    call = {"type": "function", "function": {"name": name, "arguments": args}}
    response = json.dumps({arg: place, "temperature": temp, "unit": unit, "condition": cond, "humidity": humidity},
                          ensure_ascii=False)
    r2 = f"The tool says {temp}{sym} and {cond} in {city}, humidity {humidity}%." if think else ""
    extra = ""
    if "rain" in cond or "thunder" in cond or "drizzle" in cond:
        extra = " Take an umbrella."
    elif temp_c >= 28:
        extra = " It is hot, so drink enough water."
    elif temp_c <= 2:
        extra = " Dress warmly."
    answer = f"It is currently {temp}{sym} and {cond} in {city}, with {humidity}% humidity.{extra}"
    return [{"role": "user", "content": q},
            {"role": "assistant", "content": "", "reasoning_content": echoed(rng, r1), "tool_calls": [call]},
            {"role": "tool", "content": response},
            {"role": "assistant", "content": answer, "reasoning_content": r2}]


def weather_no_tool(rng, think):
    city, _ = rng.choice(CITIES)
    q = pick(rng, [f"What's the weather like in {city}?", f"Is it cold in {city} today?", f"weather in {city}"])
    r = f"The user asks for the current weather in {city}. I have no weather tool and no live data." if think else ""
    a = (f"I cannot check the current weather in {city}: I have no access to live data. "
         "A weather website or app will have an up-to-date forecast.")
    return [{"role": "user", "content": q}, {"role": "assistant", "content": a, "reasoning_content": r}]


def fortune_direct(rng, fortunes, think):
    cat, text = rng.choice(fortunes)
    topic = cat.replace("-", " ")
    q = pick(rng, [f"Tell me a quote about {topic}.", f"Give me a fortune about {topic}.", "Tell me a fortune.",
                   "Say something funny.", "Give me a random quote.", f"Do you know a saying about {topic}?",
                   "Cheer me up with a fortune cookie.", "Tell me a joke."])
    r = pick(rng, [f"The user wants a short quote. I will pick one about {topic}.",
                   f"A fortune cookie line about {topic} fits this request.",
                   "Something short and light-hearted is best here."]) if think else ""
    a = pick(rng, ["Here is one:\n\n", "", "Here's a fortune for you:\n\n", ""]) + text
    return [{"role": "user", "content": q}, {"role": "assistant", "content": a, "reasoning_content": r}]


def fortune_tool(rng, fortunes, think):
    cat, text = rng.choice(fortunes)
    q = pick(rng, [f"Get me a fortune about {cat}.", f"Give me a {cat} fortune.", f"fortune {cat}",
                   f"I'd like a random quote on {cat}."])
    r1 = f"The user wants a fortune about {cat}. I will call get_fortune with category={cat}." if think else ""
    call = {"type": "function", "function": {"name": "get_fortune", "arguments": {"category": cat}}}
    r2 = "The tool returned a fortune. I will pass it on as it is." if think else ""
    return [{"role": "user", "content": q},
            {"role": "assistant", "content": "", "reasoning_content": echoed(rng, r1), "tool_calls": [call]},
            {"role": "tool", "content": text},
            {"role": "assistant", "content": f"Here is your {cat} fortune:\n\n{text}", "reasoning_content": r2}]


def jargon_direct(rng, term, definition, think):
    q = pick(rng, [f"What does \"{term}\" mean in hacker jargon?", f"What is {term}?",
                   f"In hacker slang, what is a {term}?", f"Explain the jargon term '{term}'.",
                   f"What do hackers mean by {term}?"])
    first = re.split(r"(?<=[.!?])\s", definition)[0]
    r = pick(rng, [f"\"{term}\" is a term from the Jargon File, the dictionary of hacker slang. {first}",
                   f"The user asks about the hacker term {term}. I remember the Jargon File entry."]) if think else ""
    return [{"role": "user", "content": q},
            {"role": "assistant", "content": f"In hacker jargon, **{term}**: {definition}", "reasoning_content": r}]


def linux_doc(rng, title, paras, think):
    q = pick(rng, [f"Tell me about {title} in the Linux kernel.", f"What does the kernel documentation say about {title}?",
                   f"Explain {title}.", f"Linux kernel: {title}?", f"Summarize the kernel document \"{title}\"."])
    r = pick(rng, [f"This is about the Linux kernel documentation on {title}. I will summarize it.",
                   f"The user asks about {title}. The kernel docs explain it; I will give the key points."]) if think else ""
    return [{"role": "user", "content": q},
            {"role": "assistant", "content": "\n\n".join(paras), "reasoning_content": r}]


def _digits_add(a, b):
    steps, carry, out = [], 0, []
    da, db = str(a)[::-1], str(b)[::-1]
    for i in range(max(len(da), len(db))):
        x = int(da[i]) if i < len(da) else 0
        y = int(db[i]) if i < len(db) else 0
        s = x + y + carry
        steps.append(f"{x} + {y}" + (f" + {carry}" if carry else "") + f" = {s}")
        out.append(s % 10)
        carry = s // 10
    if carry:
        out.append(carry)
    return steps


def arithmetic(rng, think):
    op = rng.choice(["+", "+", "-", "*"])
    if op == "+":
        a, b = rng.randint(2, 999), rng.randint(2, 999)
        res = a + b
        work = "Adding digit by digit from the right: " + "; ".join(_digits_add(a, b)) + "."
    elif op == "-":
        a, b = rng.randint(10, 999), rng.randint(1, 999)
        a, b = max(a, b), min(a, b)
        res = a - b
        work = f"{a} - {b}: check by adding back, {res} + {b} = {a}."
    else:
        a, b = rng.randint(2, 99), rng.randint(2, 9)
        res = a * b
        tens, ones = a // 10 * 10, a % 10
        work = f"{a} * {b} = {tens} * {b} + {ones} * {b} = {tens * b} + {ones * b}."
    sym = {"+": "+", "-": "-", "*": "*"}[op]
    q = pick(rng, [f"What is {a} {sym} {b}?", f"Calculate {a} {sym} {b}.", f"{a} {sym} {b} = ?", f"compute {a}{sym}{b}"])
    r = f"I need to compute {a} {sym} {b}. {work} So the result is {res}." if think else ""
    return [{"role": "user", "content": q}, {"role": "assistant", "content": f"{a} {sym} {b} = {res}", "reasoning_content": r}]


SMALL_TALK = [
    (["Hello!", "Hi", "hi there", "Hey!", "Good morning!", "Hello, how are you?"],
     "The user is greeting me. I should greet back and offer help.",
     ["Hello! How can I help you today?", "Hi! What would you like to know?",
      "Hello! I can define words, tell you a fortune, or answer simple questions."]),
    (["Who are you?", "What are you?", "What is your name?", "Introduce yourself.", "Are you a person?"],
     "The user asks who I am. I am strata-demo, a tiny model trained from scratch for the strata engine.",
     ["I am strata-demo, a tiny language model trained from scratch to demonstrate the strata inference engine. "
      "I am very small, so my answers are often wrong.",
      "My name is strata-demo. I am a small demo model that runs in strata; I know a little about words, "
      "fortunes and hacker jargon."]),
    (["What can you do?", "How can you help me?", "What do you know?"],
     "The user asks what I can do. I should list my few skills honestly.",
     ["I can define English words, tell fortunes and jokes, explain hacker jargon, do simple arithmetic, "
      "and call tools such as a dictionary lookup when they are available. I am tiny, so check what I say."]),
    (["Thank you!", "Thanks a lot.", "thanks", "Great, thank you."],
     "The user is thanking me. A short friendly reply is enough.",
     ["You're welcome!", "Glad I could help!", "You're welcome. Ask me anything else."]),
    (["Goodbye!", "Bye", "See you later."],
     "The user is leaving. I will say goodbye.",
     ["Goodbye! Have a nice day.", "Bye! Come back any time."]),
    (["What is strata?", "Tell me about strata.", "What is the strata engine?"],
     "The user asks about strata, the engine I run in.",
     ["strata is a C++ inference engine for language models with an OpenAI-compatible server. "
      "It runs hybrid models such as Qwen3.5, and I am its built-in demo model."]),
]


def small_talk(rng, think):
    qs, reasoning, answers = rng.choice(SMALL_TALK)
    return [{"role": "user", "content": rng.choice(qs)},
            {"role": "assistant", "content": rng.choice(answers), "reasoning_content": reasoning if think else ""}]


SYSTEM_PROMPTS = ["You are a helpful assistant.", "You are strata-demo, a small helpful assistant.",
                  "Answer briefly.", "You are a friendly assistant. Keep answers short."]

# ---------------------------------------------------------------------------------------------


def build(out_dir):
    rng = random.Random(SEED)
    template = load_template()
    print("reading sources...", flush=True)
    gcide = load_gcide()
    fortunes_by_cat = load_fortunes()
    fortunes = [(c, t) for c in sorted(fortunes_by_cat) for t in fortunes_by_cat[c]]
    jargon = load_jargon()
    docs = load_linux_docs()
    freq = word_frequencies([t for _, t in fortunes] + list(jargon.values())
                            + [p for _, ps in docs for p in ps])
    common = [w for w, _ in freq.most_common() if w in gcide][:4000]
    words = sorted(gcide)
    print(f"gcide {len(gcide)} words ({len(common)} common), fortunes {len(fortunes)}, "
          f"jargon {len(jargon)}, linux docs {len(docs)}", flush=True)
    jargon_terms = sorted(jargon)

    def tools_with(*required):
        pool = [LOOKUP_WORD, GET_FORTUNE, rng.choice(WEATHER_TOOLS)[0]]
        tools = list(required) + [t for t in pool if t not in required and rng.random() < 0.35]
        rng.shuffle(tools)
        return tools

    def conversation():
        """One (kind, messages, tools)."""
        think = rng.random() >= THINK_OFF_SHARE
        x = rng.random()
        if x < 0.16:
            w = rng.choice(common) if rng.random() < 0.6 else rng.choice(words)
            return "define", define_direct(rng, w, gcide[w], think), None
        if x < 0.33:
            w = rng.choice(words) if rng.random() < 0.7 else rng.choice(common)
            return "tool_lookup", tool_lookup(rng, w, gcide[w], think, None), tools_with(LOOKUP_WORD)
        if x < 0.35:
            w = "".join(rng.choice("bcdfghjklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 4)))
            return "tool_lookup_missing", tool_lookup_missing(rng, w, think), tools_with(LOOKUP_WORD)
        if x < 0.45:
            spec = rng.choice(WEATHER_TOOLS)
            tools = [spec[0]] + [t for t in (LOOKUP_WORD, GET_FORTUNE) if rng.random() < 0.35]
            rng.shuffle(tools)
            return "tool_weather", weather_call(rng, think, spec), tools
        if x < 0.47:
            return "weather_no_tool", weather_no_tool(rng, think), None
        if x < 0.51:
            return "tool_fortune", fortune_tool(rng, fortunes, think), tools_with(GET_FORTUNE)
        if x < 0.63:
            return "fortune", fortune_direct(rng, fortunes, think), None
        if x < 0.71:
            t = rng.choice(jargon_terms)
            return "jargon", jargon_direct(rng, t, jargon[t], think), None
        if x < 0.79:
            title, paras = rng.choice(docs)
            return "linux_doc", linux_doc(rng, title, paras, think), None
        if x < 0.90:
            return "arithmetic", arithmetic(rng, think), (tools_with(LOOKUP_WORD) if rng.random() < 0.2 else None)
        return "small_talk", small_talk(rng, think), (tools_with(LOOKUP_WORD) if rng.random() < 0.2 else None)

    counts, chars, samples = collections.Counter(), collections.Counter(), {}
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "corpus.jsonl.xz")
    n_target = int(os.environ.get("DEMO_CONVERSATIONS", "400000"))
    with lzma.open(path, "wt", encoding="utf-8", preset=6) as f:
        n = 0
        while n < n_target:
            kind, messages, tools = conversation()
            if rng.random() < 0.12:  # a second exchange: the first one's reasoning is dropped on render
                k2, m2, t2 = conversation()
                if t2 is None and tools is None and len(m2) == 2:
                    messages = messages + m2
                    kind = "multi_turn"
            if rng.random() < 0.15:
                messages = [{"role": "system", "content": rng.choice(SYSTEM_PROMPTS)}] + messages
            text = render(template, messages, tools)
            if len(text) > MAX_CHARS:
                continue
            think = bool(messages[-1].get("reasoning_content"))
            kind_key = kind + ("" if think else ":nothink")
            counts[kind_key] += 1
            chars[kind_key] += len(text)
            samples.setdefault(kind_key, {"messages": messages, "tools": tools, "text": text})
            f.write(json.dumps({"kind": kind_key, "text": text}, ensure_ascii=False) + "\n")
            n += 1
    stats = {"conversations": n, "characters": sum(chars.values()), "by_kind": dict(sorted(counts.items())),
             "sources": {"gcide_words": len(gcide), "common_words": len(common),
                         "fortunes": len(fortunes), "fortune_categories": sorted(fortunes_by_cat), "jargon_terms": len(jargon),
                         "linux_docs": len(docs)}}
    with open(os.path.join(out_dir, "corpus_stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    with open(os.path.join(out_dir, "corpus_samples.json"), "w") as f:
        json.dump(samples, f, indent=1, ensure_ascii=False)
    print(json.dumps(stats, indent=1))
    print(f"wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB)")


if __name__ == "__main__":
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    build(sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, ".carry", "train_demo"))
