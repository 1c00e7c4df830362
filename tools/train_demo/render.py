"""Renders chat_template.jinja the way Hugging Face's apply_chat_template does (sandboxed Jinja2,
trim_blocks, lstrip_blocks, loopcontrols, tojson = json.dumps(ensure_ascii=False)), so the corpus,
the goldens and strata all see the same prompt text. Needs only jinja2."""
import json
import os

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

TEMPLATE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat_template.jinja")


def _raise(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)


def load_template(path=TEMPLATE_PATH):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    with open(path, encoding="utf-8") as f:
        return env.from_string(f.read())


def render(template, messages, tools=None, add_generation_prompt=False, **kwargs):
    """kwargs: extra template variables such as enable_thinking."""
    context = {"messages": messages, "add_generation_prompt": add_generation_prompt}
    if tools:
        context["tools"] = tools
    context.update(kwargs)
    return template.render(**context)
