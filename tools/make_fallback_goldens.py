#!/usr/bin/env python3
# Writes fallback_goldens.json: strata's ChatML fallback chat template (read from
# src/text/chat/fallback_template.cpp) rendered by Jinja2 configured like Hugging Face transformers'
# chat-template renderer (as tools/make_jinja_goldens.py sets it up), for a few conversations.
# chat_template_test.cpp checks strata's render of the same template against every case.
# Usage: python3 tools/make_fallback_goldens.py   (needs jinja2; writes tests/text/chat/fallback_goldens.json)
import json
import os
import re

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))


def make_env():
    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def raise_exception(message):
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


source = open(os.path.join(ROOT, "src/text/chat/fallback_template.cpp"), encoding="utf-8").read()
template = re.search(r'R"JINJA\((.*?)\)JINJA"', source, re.S).group(1)

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"]}}}]
CASES = {
    "user_only": {"messages": [{"role": "user", "content": "Hello!"}]},
    "system_multi_turn": {"messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a prime."},
        {"role": "assistant", "content": "7"}, {"role": "user", "content": "Another?"}]},
    "content_parts": {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "Part one."}, {"type": "text", "text": "Part two."}]}]},
    "tools_offered": {"tools": TOOLS, "messages": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "Weather in Oslo?"}]},
    "tools_call_result": {"tools": TOOLS, "messages": [
        {"role": "user", "content": "Weather in Oslo and Rome?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
            {"id": "call_2", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": -3}"},
        {"role": "tool", "tool_call_id": "call_2", "content": "{\"temp\": 21}"},
        {"role": "user", "content": "Thanks \u00e9\u00e8!"}]},
}

env = make_env()
out = {"source": "kChatMl in src/text/chat/fallback_template.cpp", "cases": []}
for name, case in CASES.items():
    for gen in (False, True):
        text = env.from_string(template).render(messages=case["messages"], tools=case.get("tools"),
                                                documents=None, add_generation_prompt=gen)
        out["cases"].append({"case": name, "add_generation_prompt": gen,
                             "messages": case["messages"], "tools": case.get("tools"), "output": text})
with open(os.path.join(ROOT, "tests/text/chat/fallback_goldens.json"), "w", encoding="utf-8") as f:
    json.dump(out, f, ensure_ascii=False, indent=1)
    f.write("\n")
