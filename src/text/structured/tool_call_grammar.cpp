// Tool-call grammars over the declared tools.
#include "text/structured/tool_call_grammar.h"

#include <fmt/format.h>

#include <algorithm>
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

Rule hermes_call(Grammar& g, const std::string& name, const OJ& params, Rule ws,
                 const JsonSchemaOptions& o) {
  static const OJ kAnyObject = {{"type", "object"}};
  const OJ& schema = params.is_object() ? params : kAnyObject;
  auto lit = [&](std::string_view s) { return ref(g.literal(s)); };
  return g.sequence({ref(ws), lit("{"), ref(ws), lit("\"name\""), ref(ws), lit(":"), ref(ws),
                     lit(OJ(name).dump()), ref(ws), lit(","), ref(ws), lit("\"arguments\""),
                     ref(ws), lit(":"), ref(ws), ref(add_json_schema(g, schema, schema, o)),
                     ref(ws), lit("}"), ref(ws), lit("</tool_call>")});
}

}  // namespace

Grammar tool_call_grammar(const OJ& tools, ToolCallSyntax syntax, const JsonSchemaOptions& o) {
  check(tools.is_array() && !tools.empty(), ErrorKind::kInvalidInput, "tool-call grammar: no tools");
  Grammar g;
  ByteSet space;
  for (char c : std::string_view(" \t\n\r")) space.add(static_cast<uint8_t>(c));
  const Rule ws = g.repeat(g.sequence({g.bytes(space)}), 0, o.max_whitespace);
  std::vector<Rule> calls;
  for (size_t i = 0; i < tools.size(); ++i) {
    const OJ& fn = tools[i].contains("function") ? tools[i]["function"] : tools[i];
    const std::string name = fn.value("name", std::string());
    const OJ params = fn.contains("parameters") ? fn["parameters"] : OJ(nullptr);
    try {
      calls.push_back(syntax == ToolCallSyntax::kQwenXml ? xml_call(g, name, params, o)
                                                         : hermes_call(g, name, params, ws, o));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kUnsupported && e.kind() != ErrorKind::kInvalidInput) throw;
      // A schema this cannot compile (an agent's tool with a 512K maxLength, a keyword not
      // supported) still gets calls that name the tool and parse: its arguments are left free.
      // The rules its failed compile added are unreachable.
      log::debug("tool '{}': arguments left free in constrained calls: {}", name, e.what());
      calls.push_back(syntax == ToolCallSyntax::kQwenXml ? free_xml_call(g, name)
                                                         : hermes_call(g, name, OJ(nullptr), ws, o));
    }
  }
  g.set_root(calls.size() == 1 ? calls[0] : g.choice(calls));
  return g;
}

}  // namespace strata::text::structured
