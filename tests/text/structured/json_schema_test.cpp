// The schema compiler and its automaton: for each keyword, texts the grammar must accept and texts
// it must refuse (tables written from the JSON Schema specification, not from our output).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/structured/automaton.h"
#include "text/structured/json_schema.h"
#include "text/structured/regex_grammar.h"

namespace strata::text::structured {
namespace {

using OJ = nlohmann::ordered_json;

bool matches(const Grammar& g, std::string_view text) {
  Automaton a(g);
  const uint32_t s = a.walk(a.start(), text);
  return s != Automaton::kDead && a.accepts(s);
}

struct Case {
  const char* schema;
  std::vector<const char*> accept, reject;
};

void run(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    const Grammar g = compile_json_schema(OJ::parse(c.schema));
    for (const char* t : c.accept) EXPECT_TRUE(matches(g, t)) << c.schema << " should accept " << t;
    for (const char* t : c.reject) EXPECT_FALSE(matches(g, t)) << c.schema << " should refuse " << t;
  }
}

TEST(JsonSchemaGrammar, AcceptsAndRefusesByType) {
  run({
      {R"({"type":"string"})", {R"("")", R"("abc")", R"("a\"b\\c\n\u00e9")", "\"h\xC3\xA9\""},
       {"abc", R"("a)", R"("a"b")", "\"a\nb\"", R"("\x")", R"("\ud800")", "\"\xC3\"", "1"}},
      {R"({"type":"integer"})", {"0", "-7", "123456"}, {"01", "-0", "1.5", "1e3", "+1", "\"1\""}},
      {R"({"type":"number"})", {"0", "-7", "1.25", "3e10", "2.5E-3"}, {"1.", ".5", "01", "1e"}},
      {R"({"type":"boolean"})", {"true", "false"}, {"True", "1", "null"}},
      {R"({"type":"null"})", {"null"}, {"nul", "\"null\""}},
      {R"({"type":["string","null"]})", {"null", R"("x")"}, {"1"}},
  });
}

TEST(JsonSchemaGrammar, ObjectsWritePropertiesInOrderWithRequiredOnesPresent) {
  run({
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},
          "required":["a"],"additionalProperties":false})",
       {R"({"a":1})", R"({"a":1,"b":"x"})", R"({ "a" : 1 , "b" : "x" })", "{\n  \"a\": 2\n}"},
       {R"({})", R"({"b":"x"})", R"({"b":"x","a":1})", R"({"a":"1"})", R"({"a":1,"c":2})",
        R"({"a":1,})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}})",
       {R"({})", R"({"b":2})", R"({"a":1})", R"({"a":1,"b":2})"}, {R"({,"b":2})", R"({"a":1"b":2})"}},
      {R"({"type":"object"})", {R"({})", R"({"x":[1,{"y":null}],"z":"w"})"}, {R"([])", R"({"x"})"}},
      {R"({"type":"object","properties":{"o":{"type":"object","properties":{"k":{"const":3}},
          "required":["k"]}},"required":["o"]})",
       {R"({"o":{"k":3}})"}, {R"({"o":{}})", R"({"o":{"k":4}})"}},
  });
}

TEST(JsonSchemaGrammar, EnumConstAndComposition) {
  run({
      {R"({"enum":["red","green",3,null]})", {R"("red")", R"("green")", "3", "null"},
       {R"("blue")", R"("re")", "4"}},
      {R"({"const":{"a":[1,2]}})", {R"({"a":[1,2]})"}, {R"({"a":[1]})"}},
      {R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":2}]})", {"5", R"("ab")"},
       {R"("abc")", "true"}},
      {R"({"oneOf":[{"type":"boolean"},{"type":"null"}]})", {"true", "null"}, {"0"}},
      {R"({"allOf":[{"type":"integer"}]})", {"1"}, {"\"1\""}},
  });
}

TEST(JsonSchemaGrammar, ArraysHonourItemsAndCounts) {
  run({
      {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
       {"[1]", "[1,2,3]", "[ 1 , 2 ]"}, {"[]", "[1,2,3,4]", "[1,]", "[\"a\"]"}},
      {R"({"type":"array","items":{"type":"string"}})", {"[]", R"(["a","b"])"}, {"[1]"}},
      {R"({"type":"array","maxItems":0})", {"[]"}, {"[1]"}},
  });
}

TEST(JsonSchemaGrammar, StringLengthsPatternsAndFormats) {
  run({
      {R"({"type":"string","minLength":2,"maxLength":3})", {R"("ab")", R"("abc")", "\"\xC3\xA9\xC3\xA9\""},
       {R"("a")", R"("abcd")"}},
      {R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"})", {R"("AB-123")"},
       {R"("ab-123")", R"("AB-12")", R"("AB-1234")"}},
      {R"({"type":"string","pattern":"(cat|dog)s?"})", {R"("cat")", R"("dogs")"}, {R"("cow")"}},
      {R"({"type":"string","pattern":"a\"b"})", {R"("a\"b")"}, {R"("a"b")"}},
      {R"({"type":"string","format":"date"})", {R"("2024-02-29")"}, {R"("2024-13-01")", R"("24-01-01")"}},
      {R"({"type":"string","format":"date-time"})", {R"("2024-02-29T12:30:00Z")", R"("2024-02-29T12:30:00.5+02:00")"},
       {R"("2024-02-29 12:30:00Z")", R"("2024-02-29T25:00:00Z")"}},
      {R"({"type":"string","format":"time"})", {R"("23:59:59Z")"}, {R"("23:59")"}},
      {R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"},
       {R"("123e4567e89b12d3a456426614174000")"}},
      {R"({"type":"string","format":"email"})", {R"("a.b@example.com")"}, {R"("a@b")", R"("@x.com")"}},
      {R"({"type":"string","format":"uri"})", {R"("https://example.com/a?b=c")"}, {R"("no scheme")"}},
  });
}

TEST(JsonSchemaGrammar, NumberBounds) {
  run({
      {R"({"type":"integer","minimum":5,"maximum":120})", {"5", "9", "10", "99", "120"},
       {"4", "0", "121", "200", "-5", "1000"}},
      {R"({"type":"integer","minimum":-20,"maximum":-3})", {"-20", "-3", "-15"}, {"-2", "-21", "0", "3"}},
      {R"({"type":"integer","exclusiveMinimum":0})", {"1", "987654"}, {"0", "-1"}},
      {R"({"type":"number","minimum":0,"maximum":1})", {"0", "1", "0.5", "0.999"}, {"1.5", "-0.5", "2"}},
  });
}

TEST(JsonSchemaGrammar, RefsToDefsIncludingRecursionCutAtADepth) {
  const char* tree = R"({"$defs":{"node":{"type":"object","properties":{
      "v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},
      "required":["v","kids"]}},"$ref":"#/$defs/node"})";
  run({{tree,
        {R"({"v":1,"kids":[]})", R"({"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[]}]}]})"},
        {R"({"v":1})", R"({"v":1,"kids":[{"v":2}]})"}},
       {R"({"definitions":{"c":{"enum":["x"]}},"type":"array","items":{"$ref":"#/definitions/c"}})",
        {R"(["x","x"])"}, {R"(["y"])"}}});
  // Deeper than the cut: refused.
  JsonSchemaOptions shallow;
  shallow.ref_depth = 2;
  const Grammar g = compile_json_schema(OJ::parse(tree), shallow);
  EXPECT_TRUE(matches(g, R"({"v":1,"kids":[]})"));
  EXPECT_FALSE(matches(g, R"({"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[]}]}]})"));
}

TEST(JsonSchemaGrammar, WhitespaceIsBounded) {
  const Grammar g = compile_json_schema(OJ::parse(R"({"type":"array"})"));
  EXPECT_TRUE(matches(g, "[" + std::string(4, ' ') + "]"));
  EXPECT_FALSE(matches(g, "[" + std::string(9, ' ') + "]"));
  EXPECT_FALSE(matches(g, "[\n" + std::string(8, ' ') + "1]"));
}

// With indentation (tool calls): a line break and up to max_indent blanks too, pretty-printed.
TEST(JsonSchemaGrammar, IndentedWhitespaceTakesPrettyPrintedJsonAndIsBounded) {
  JsonSchemaOptions indented;
  indented.max_indent = 32;
  const Grammar g = compile_json_schema(OJ::parse(R"({"type":"array"})"), indented);
  EXPECT_TRUE(matches(g, "[\n  1,\n  [\n" + std::string(32, ' ') + "2\n  ]\n]\n"));
  EXPECT_TRUE(matches(g, "[ \r\n\t\t1 ,\n" + std::string(32, '\t') + "2]"));
  EXPECT_FALSE(matches(g, "[\n" + std::string(33, ' ') + "1]"));
  EXPECT_FALSE(matches(g, "[" + std::string(5, ' ') + "\n1]"));
  EXPECT_FALSE(matches(g, "[\n\n\n\n\n1]"));
}

TEST(JsonSchemaGrammar, JsonObjectIsAnyObject) {
  const Grammar g = any_json_object();
  EXPECT_TRUE(matches(g, R"({"a":{"b":[1,2,{"c":"d"}]},"e":-1.5e3})"));
  EXPECT_FALSE(matches(g, "[1]"));
  EXPECT_FALSE(matches(g, "\"x\""));
  EXPECT_FALSE(matches(g, R"({"a":1)"));
}

void expect_refused(const char* schema, ErrorKind kind, const std::string& mention) {
  try {
    compile_json_schema(OJ::parse(schema));
    ADD_FAILURE() << schema << " compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
  }
}

TEST(JsonSchemaGrammar, RefusesWhatItDoesNotSupportNamingIt) {
  expect_refused(R"({"type":"array","uniqueItems":true})", ErrorKind::kUnsupported, "'uniqueItems'");
  expect_refused(R"({"properties":{"a":{"type":"object","minProperties":1,"if":{}}}})",
                 ErrorKind::kUnsupported, "'minProperties', 'if' at '#/properties/a'");
  expect_refused(R"({"type":"string","pattern":"(a)\\1"})", ErrorKind::kUnsupported, "backreferences");
  expect_refused(R"({"type":"string","pattern":"(?=a)b"})", ErrorKind::kUnsupported, "lookaround");
  expect_refused(R"({"type":"string","format":"ipv6"})", ErrorKind::kUnsupported, "ipv6");
  expect_refused(R"({"$ref":"#/$defs/missing"})", ErrorKind::kInvalidInput, "names nothing");
  expect_refused(R"({"type":"strange"})", ErrorKind::kInvalidInput, "unknown type");
  expect_refused(R"({"$ref":"http://example.com/s.json"})", ErrorKind::kUnsupported, "inside the schema");
}

TEST(RegexGrammar, RawModeMatchesTheBytesThemselves) {
  Grammar g;
  g.set_root(compile_regex(g, "[a-c]+\\.(txt|md)\n?", RegexMode::kRaw));
  EXPECT_TRUE(matches(g, "abc.txt"));
  EXPECT_TRUE(matches(g, "a.md\n"));
  EXPECT_FALSE(matches(g, ".md"));
  EXPECT_FALSE(matches(g, "ad.md"));
  EXPECT_FALSE(matches(g, "a.md\\n"));
}

}  // namespace
}  // namespace strata::text::structured
