// Tool-call grammars over the declared tools, one per call syntax.
#include "text/structured/tool_call_grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "text/structured/regex_grammar.h"

namespace strata::text::structured {

namespace {

using OJ = nlohmann::ordered_json;
using Rule = Grammar::Rule;

Grammar::Item ref(Rule r) { return Grammar::ref(r); }

// Whether a parameter's value is written raw (a string schema; the parser keeps raw text as a
// string), and whether it may also be null.
bool raw_string(const OJ& s, bool& nullable) {
  nullable = false;
  if (!s.is_object() || s.contains("$ref") || s.contains("anyOf") || s.contains("oneOf"))
    return false;
  auto t = s.find("type");
  if (t == s.end()) {
    // No type: the parser keeps the text as it is, so strings only, written raw (as JSON, the
    // quotes would be part of the value).
    if (auto c = s.find("const"); c != s.end()) return c->is_string();
    auto e = s.find("enum");
    return e != s.end() && e->is_array() && !e->empty() &&
           std::all_of(e->begin(), e->end(), [](const OJ& v) { return v.is_string(); });
  }
  if (t->is_string()) return *t == "string";
  if (!t->is_array()) return false;
  bool string = false;
  for (const OJ& x : *t) {
    if (x == "string") string = true;
    else if (x == "null") nullable = true;
    else return false;
  }
  return string;
}

// A raw string value in the XML syntax: no '<' (it would start a tag) and no newline (the
// parser strips one around the value).
Rule raw_value(Grammar& g, const OJ& s, bool nullable) {
  std::vector<Rule> alts;
  if (auto e = s.find("enum"); e != s.end() && e->is_array()) {
    for (const OJ& v : *e)
      if (v.is_string()) alts.push_back(g.literal(v.get<std::string>()));
  } else if (auto c = s.find("const"); c != s.end() && c->is_string()) {
    alts.push_back(g.literal(c->get<std::string>()));
  } else if (auto p = s.find("pattern"); p != s.end() && p->is_string()) {
    alts.push_back(compile_regex(g, p->get<std::string>(), RegexMode::kRaw));
  } else {
    const int64_t min = s.value("minLength", int64_t{0});
    const int64_t max = s.value("maxLength", int64_t{-1});
    const std::string bounds = max < 0 ? fmt::format("{{{},}}", min) : fmt::format("{{{},{}}}", min, max);
    alts.push_back(compile_regex(g, "[^<\\n]" + bounds, RegexMode::kRaw));
  }
  if (nullable) alts.push_back(g.literal("null"));
  check(!alts.empty(), ErrorKind::kUnsupported, "a string enum without strings");
  return alts.size() == 1 ? alts[0] : g.choice(alts);
}

Rule xml_call(Grammar& g, const std::string& name, const OJ& params, const JsonSchemaOptions& o) {
  std::vector<Grammar::Item> items = {ref(g.literal("\n<function=" + name + ">\n"))};
  const OJ* props = nullptr;
  std::vector<std::string> required;
  if (params.is_object()) {
    if (auto p = params.find("properties"); p != params.end() && p->is_object()) props = &*p;
    if (auto r = params.find("required"); r != params.end() && r->is_array())
      for (const OJ& x : *r)
        if (x.is_string()) required.push_back(x.get<std::string>());
  }
  if (props != nullptr) {
    // Each parameter in the schema's order; optional ones may be left out.
    for (const auto& [key, sub] : props->items()) {
      bool nullable = false;
      const Rule value = raw_string(sub, nullable) ? raw_value(g, sub, nullable)
                                                   : add_json_schema(g, sub, params, o);
      const Rule one = g.sequence({ref(g.literal("<parameter=" + key + ">\n")), ref(value),
                                   ref(g.literal("\n</parameter>\n"))});
      const bool needed = std::find(required.begin(), required.end(), key) != required.end();
      items.push_back(ref(needed ? one : g.repeat(one, 0, 1)));
    }
  }
  items.push_back(ref(g.literal("</function>\n</tool_call>")));
  return g.sequence(std::move(items));
}

// A call in the XML syntax whose parameters are free: any names, raw values without '<'.
Rule free_xml_call(Grammar& g, const std::string& name) {
  const Rule one = g.sequence({ref(g.literal("<parameter=")), ref(compile_regex(g, "[A-Za-z0-9_.\\-]+", RegexMode::kRaw)),
                               ref(g.literal(">\n")), ref(compile_regex(g, "[^<]*", RegexMode::kRaw)),
                               ref(g.literal("\n</parameter>\n"))});
  return g.sequence({ref(g.literal("\n<function=" + name + ">\n")), ref(g.repeat(one, 0, -1)),
                     ref(g.literal("</function>\n</tool_call>"))});
}

// What every syntax but the XML one is built of: whitespace between tokens (a JSON schema's, with
// the options' indentation) and literals.
struct Pieces {
  Grammar& g;
  Rule ws;
  Grammar::Item lit(std::string_view s) const { return ref(g.literal(s)); }
  Grammar::Item space() const { return ref(ws); }
};

// The rule of a tool's arguments: its parameters schema, or any object when it has none or the
// schema cannot be compiled (the rules a failed compile added are unreachable).
Rule arguments(Grammar& g, const std::string& name, const OJ& params, const JsonSchemaOptions& o) {
  static const OJ kAnyObject = {{"type", "object"}};
  const OJ& schema = params.is_object() ? params : kAnyObject;
  try {
    return add_json_schema(g, schema, schema, o);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kUnsupported && e.kind() != ErrorKind::kInvalidInput) throw;
    // An agent's tool with a 512K maxLength, a keyword not supported: calls still name the tool
    // and parse.
    log::debug("tool '{}': arguments left free in constrained calls: {}", name, e.what());
    return add_json_schema(g, kAnyObject, kAnyObject, o);
  }
}

// The nine-character call id Mistral's templates write.
Rule mistral_call_id(Grammar& g) { return compile_regex(g, "[A-Za-z0-9]{9}", RegexMode::kRaw); }

// What a syntax's calls hold besides the name and the arguments.
struct CallForm {
  Rule key = 0;                 // the arguments' key: "arguments" (Llama 3: or "parameters")
  std::optional<Rule> head;     // between the brace and "name": Llama 3's "type": "function",
  std::optional<Rule> tail;     // after the arguments: Mistral's "id": "..."
  std::optional<Rule> call_id;  // before [ARGS]: Mistral's [CALL_ID]...
};

CallForm call_form(const Pieces& p, ToolCallSyntax syntax) {
  Grammar& g = p.g;
  CallForm f;
  f.key = g.literal("\"arguments\"");
  switch (syntax) {
    case ToolCallSyntax::kLlama3:
      f.key = g.choice({g.literal("\"parameters\""), f.key});
      f.head = g.repeat(g.sequence({p.lit("\"type\""), p.space(), p.lit(":"), p.space(),
                                    p.lit("\"function\""), p.space(), p.lit(","), p.space()}),
                        0, 1);
      break;
    case ToolCallSyntax::kMistralList:
      f.tail = g.repeat(
          g.sequence({p.space(), p.lit(","), p.space(), p.lit("\"id\""), p.space(), p.lit(":"),
                      p.space(), p.lit("\""), ref(mistral_call_id(g)), p.lit("\"")}),
          0, 1);
      break;
    case ToolCallSyntax::kMistralArgs:
      f.call_id = g.repeat(g.sequence({p.lit("[CALL_ID]"), ref(mistral_call_id(g))}), 0, 1);
      break;
    default:
      break;
  }
  return f;
}

// A JSON call is {"name": NAME, KEY: ARGUMENTS}, with the form's head and tail. Its opening, up to
// the name, is every tool's: one rule before the choice of tools, so that while a call opens
// (whitespace and all) the automaton holds one way of reading it, not one per tool.
Rule json_call_opening(const Pieces& p, const CallForm& f) {
  std::vector<Grammar::Item> items = {p.lit("{"), p.space()};
  if (f.head) items.push_back(ref(*f.head));
  for (Grammar::Item item : {p.lit("\"name\""), p.space(), p.lit(":"), p.space()})
    items.push_back(item);
  return p.g.sequence(std::move(items));
}

// A JSON call from its name on: NAME, KEY: ARGUMENTS}.
Rule json_call_rest(const Pieces& p, const CallForm& f, const std::string& name, Rule args) {
  std::vector<Grammar::Item> items = {p.lit(OJ(name).dump()), p.space(), p.lit(","), p.space(),
                                      ref(f.key), p.space(), p.lit(":"), p.space(), ref(args)};
  if (f.tail) items.push_back(ref(*f.tail));
  items.push_back(p.space());
  items.push_back(p.lit("}"));
  return p.g.sequence(std::move(items));
}

// A name the parser reads whole in a NAME[ARGS] call.
bool mistral_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

// One tool's call (of a JSON syntax, from its name on: json_call_opening comes before); nullopt
// when the syntax cannot name it.
std::optional<Rule> one_call(const Pieces& p, const CallForm& f, ToolCallSyntax syntax,
                             const std::string& name, const OJ& params,
                             const JsonSchemaOptions& o) {
  Grammar& g = p.g;
  switch (syntax) {
    case ToolCallSyntax::kQwenXml:
      try {
        return xml_call(g, name, params, o);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kUnsupported && e.kind() != ErrorKind::kInvalidInput) throw;
        log::debug("tool '{}': arguments left free in constrained calls: {}", name, e.what());
        return free_xml_call(g, name);
      }
    case ToolCallSyntax::kMistralArgs:
      if (!mistral_name(name)) {
        log::debug("tool '{}': its name cannot be written in a [TOOL_CALLS]NAME[ARGS] call", name);
        return std::nullopt;
      }
      return g.sequence({p.lit(name), ref(*f.call_id), p.lit("[ARGS]"), p.space(),
                         ref(arguments(g, name, params, o))});
    default:
      return json_call_rest(p, f, name, arguments(g, name, params, o));
  }
}

// The whole grammar around `call` (any declared tool's): what comes before and after a call, and
// for a Mistral list the list of calls.
Rule around(const Pieces& p, ToolCallSyntax syntax, Rule call, bool single_call) {
  Grammar& g = p.g;
  switch (syntax) {
    case ToolCallSyntax::kHermes:
      return g.sequence({p.space(), ref(call), p.space(), p.lit("</tool_call>")});
    case ToolCallSyntax::kQwenXml:
      return call;
    case ToolCallSyntax::kLlama3:
    case ToolCallSyntax::kMistralArgs:
      return g.sequence({p.space(), ref(call)});
    case ToolCallSyntax::kMistralList: {
      const Rule more = g.repeat(g.sequence({p.space(), p.lit(","), p.space(), ref(call)}), 0,
                                 single_call ? 0 : -1);
      return g.sequence(
          {p.space(), p.lit("["), p.space(), ref(call), ref(more), p.space(), p.lit("]")});
    }
  }
  return call;
}

}  // namespace

Grammar tool_call_grammar(const OJ& tools, ToolCallSyntax syntax, const ToolCallOptions& options) {
  check(tools.is_array() && !tools.empty(), ErrorKind::kInvalidInput, "tool-call grammar: no tools");
  Grammar g;
  const Pieces p{g, json_whitespace(g, options.json)};
  const CallForm form = call_form(p, syntax);
  std::vector<Rule> calls;
  for (const OJ& tool : tools) {
    const OJ& fn = tool.contains("function") ? tool["function"] : tool;
    const std::string name = fn.value("name", std::string());
    const OJ params = fn.contains("parameters") ? fn["parameters"] : OJ(nullptr);
    if (std::optional<Rule> call = one_call(p, form, syntax, name, params, options.json))
      calls.push_back(*call);
  }
  check(!calls.empty(), ErrorKind::kUnsupported,
        "no tool's name can be written in a [TOOL_CALLS]NAME[ARGS] call");
  Rule call = calls.size() == 1 ? calls[0] : g.choice(calls);
  if (syntax != ToolCallSyntax::kQwenXml && syntax != ToolCallSyntax::kMistralArgs)
    call = g.sequence({ref(json_call_opening(p, form)), ref(call)});
  g.set_root(around(p, syntax, call, options.single_call));
  return g;
}

std::vector<std::string> tool_call_special_tokens(ToolCallSyntax syntax) {
  if (syntax == ToolCallSyntax::kMistralArgs) return {"[ARGS]", "[CALL_ID]"};
  return {};
}

}  // namespace strata::text::structured
