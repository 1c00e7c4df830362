// The GBNF compiler: for grammars using each part of llama.cpp's format (grammars/README.md),
// texts the grammar must accept and texts it must refuse, and the errors for malformed, incomplete,
// left-recursive and oversized grammars (their line, column and rule).
#include "text/structured/gbnf.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/error.h"
#include "text/structured/automaton.h"

namespace strata::text::structured {
namespace {

bool matches(const Grammar& g, std::string_view text) {
  Automaton a(g);
  const uint32_t s = a.walk(a.start(), text);
  return s != Automaton::kDead && a.accepts(s);
}

struct Case {
  std::string grammar;
  std::vector<std::string> accept, reject;
};

void run(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    const Grammar g = compile_gbnf(c.grammar);
    for (const std::string& t : c.accept)
      EXPECT_TRUE(matches(g, t)) << c.grammar << "\nshould accept: " << t;
    for (const std::string& t : c.reject)
      EXPECT_FALSE(matches(g, t)) << c.grammar << "\nshould refuse: " << t;
  }
}

// The error compile_gbnf(grammar) throws; fails the test when it throws none.
Error error_of(const std::string& grammar) {
  try {
    compile_gbnf(grammar);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << grammar;
  return Error(ErrorKind::kInternal, "");
}

void expect_error(const std::string& grammar, const std::string& words,
                  ErrorKind kind = ErrorKind::kInvalidInput) {
  const Error e = error_of(grammar);
  EXPECT_EQ(e.kind(), kind) << grammar << "\n" << e.what();
  EXPECT_NE(std::string(e.what()).find(words), std::string::npos)
      << grammar << "\n"
      << e.what() << "\nshould mention: " << words;
}

TEST(GbnfGrammar, LiteralsAndAlternatives) {
  run({
      {R"(root ::= "yes" | "no")", {"yes", "no"}, {"", "y", "yesno", "Yes", "no "}},
      {R"(root ::= "a\"b\\c\n\t\r\x41\u00e9\U0001F600\[\]\-")",
       {"a\"b\\c\n\t\rA\xC3\xA9\xF0\x9F\x98\x80[]-"},
       {"a\"b\\c"}},
      {"root ::= \"h\xC3\xA9\" \"\"", {"h\xC3\xA9"}, {"he", "h\xC3"}},
      {R"(root ::= "a" ( | "b") | )", {"a", "ab", ""}, {"b", "abb"}},
  });
}

TEST(GbnfGrammar, CharacterClasses) {
  run({
      {"root ::= [a-c0-9_]+", {"a", "abc09_", "_"}, {"", "d", "A", "a-"}},
      {R"(root ::= [^a-z\n]*)", {"", "ABC 1", "\xC3\xA9\xF0\x9F\x98\x80"}, {"a", "\n", "Az"}},
      {"root ::= [\xE3\x81\x81-\xE3\x82\x9F]+",  // hiragana, written as UTF-8
       {"\xE3\x81\xB2\xE3\x82\x89", "\xE3\x81\x81"},
       {"\xE3\x82\xAB", "a", ""}},
      {R"(root ::= [\u0100-\u017F\x41])",
       {"A", "\xC4\x80", "\xC5\xBF"},
       {"B", "\xC6\x80", "\xC3\xBF"}},
      {R"(root ::= [\]\-a])", {"]", "-", "a"}, {"b", "\\"}},
      {"root ::= [a-]", {"a", "-"}, {"b"}},
      {R"(root ::= [^"\\\x7F\x00-\x1F])",
       {"a", " ", "\xE2\x82\xAC"},
       {"\"", "\\", "\x7F", "\n", std::string(1, '\0')}},
      {"root ::= [^] | \"x\" []", {"a", "\n", "x"}, {"", "ab"}},
  });
}

TEST(GbnfGrammar, AnyCharacterIsOneWholeUtf8Character) {
  run({{"root ::= . .",
        {"ab", "\n\n", "\xC3\xA9\xF0\x9F\x98\x80", "\xF4\x8F\xBF\xBF\xEF\xBF\xBF"},
        {"a", "abc", "\xC3", "a\xC3", "a\xED\xA0\x80", "a\xC0\x80", "a\xF4\x90\x80\x80",
         "a\xFF"}}});
}

TEST(GbnfGrammar, Repeats) {
  run({
      {R"(root ::= "a"{2,3} "b"{2} "c"{1,} "d"?)",
       {"aabbc", "aaabbccd", "aabbcccc"},
       {"abbc", "aaaabbc", "aabbbc", "aabb", "aabbcdd"}},
      {R"(root ::= "x"{0} "y"{0,2} "z"*)", {"", "yy", "yzzz", "zz"}, {"x", "yyy"}},
      {R"(root ::= [0-9] { 1 , 3 } ("-" [0-9]+)+)", {"1-2", "123-4-56"}, {"1", "1234-5", "1-"}},
      {R"(root ::= "ab"+ "c"*?)", {"ab", "ababcc"}, {"a", "abb"}},
  });
}

TEST(GbnfGrammar, GroupsRulesAndRecursion) {
  run({
      {R"(root ::= ("ab" | "c")* "!")", {"!", "abc!", "ccab!"}, {"a!", "abc", "!!"}},
      {"root ::= value\nvalue ::= \"[\" value \"]\" | \"x\"",
       {"x", "[x]", "[[[x]]]"},
       {"[x", "[]", "[[x]"}},
      {"root  ::= expr\n"
       "expr  ::= term ((\"+\" | \"-\") term)*\n"
       "term  ::= num | \"(\" expr \")\"\n"
       "num   ::= [0-9]+\n",
       {"1+2", "(1-2)+3", "((7))", "10-(2+3)-1"},
       {"1+", "(1", "1++2", "()", "-1"}},
      {"root ::= list-of_2\nlist-of_2 ::= Item2 (\",\" Item2)*\nItem2 ::= \"i\"",
       {"i", "i,i,i"},
       {"i,", ",i"}},
  });
}

TEST(GbnfGrammar, CommentsAndLineBreaks) {
  run({
      {"# a grammar for lists\n"
       "\n"
       "root ::= (   # a group goes on over lines\n"
       "    \"- \" item\n"
       "  )+   # one or more\n"
       "item ::= [^\\n]+ \"\\n\" |\n"
       "         \"(empty)\\n\"  # after '|' the rule goes on\n",
       {"- a\n", "- one\n- (empty)\n"},
       {"- a", "-a\n", ""}},
      {"root ::= a\r\na ::= \"x\" |\r\n  \"y\"\r\n", {"x", "y"}, {"xy"}},
      {"root ::= \"#\" # a literal '#' is no comment", {"#"}, {""}},
  });
}

TEST(GbnfGrammar, AJsonGrammar) {
  run({{R"(
# JSON texts whose top level is an object
root    ::= ws object ws
value   ::= object | array | string | number | "true" | "false" | "null"
object  ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member  ::= string ws ":" ws value
array   ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string  ::= "\"" (
              [^"\\\x00-\x1F] |
              "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )   # an escape
            )* "\""
number  ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws      ::= [ \t\n]{0,4}
)",
        {R"({})", R"({"a": [1, -2.5e3, true, null], "b": {"c": "d\n\u00e9"}})",
         "{\"k\": \"h\xC3\xA9\"}", " {\n  \"x\" : 0\n} "},
        {R"([])", R"({"a"})", R"({"a": tru})", R"({"a": "\x"})", "{\"a\": \"\n\"}", R"({"a": 01})",
         R"({"a": 1,})"}}});
}

TEST(GbnfGrammar, MalformedGrammarsNameTheLineColumnAndRule) {
  expect_error("root ::= (\"a\"",
               "line 1, column 14 (rule 'root'): expected ')' to close the "
               "group opened at line 1, column 10");
  expect_error("root ::= \"a", "line 1, column 10 (rule 'root'): a string literal with no closing");
  expect_error("root ::= [a-", "a character class with no closing ']'");
  expect_error("root = \"a\"", "line 1, column 6 (rule 'root'): expected '::='");
  expect_error("root ::= *", "'*' has nothing before it to repeat");
  expect_error("root ::= \"a\"{3,2}", "the repeat {3,2} has its maximum below its minimum");
  expect_error("root ::= \"a\"{20000}", "a repeat bound over 10000");
  expect_error("root ::= \"a\"{2", "expected ',' or '}' in the repeat");
  expect_error("root ::= \"a\"{x}", "expected a number");
  expect_error("root ::= \"\\q\"", "unknown escape '\\q'");
  expect_error("root ::= \"\\x4\"", "the escape needs 2 hex digits");
  expect_error("root ::= [z-a]", "the range U+007A-U+0061 is out of order");
  expect_error("root ::= \"a\" b ::= \"c\"", "unexpected ':' (a rule ends at the end of its line");
  expect_error("root ::= \"a\")", "unexpected ')' (no group is open)");
  expect_error("root ::= \"a\"\n  \"b\"", "line 2, column 3: expected a rule name, found '\"'");
  expect_error("root ::= \"a\"\nitem ::= \"b\"\nroot ::= \"c\"",
               "line 3, column 1 (rule 'root'): rule 'root' is defined twice (first at line 1, "
               "column 1)");
  expect_error("root ::= \"\\uD800\"", "U+D800 is a surrogate");
  expect_error("root ::= \"\\U00110000\"", "U+110000 is past the last code point");
  expect_error("root ::= \"a\xFF\"", "line 1, column 12: the text is not valid UTF-8");
}

TEST(GbnfGrammar, UndefinedRulesAndAMissingRootAreErrors) {
  expect_error("root ::= item \"!\"\nitem ::= thing",
               "line 2, column 10 (rule 'item'): rule "
               "'thing' is used but never defined");
  expect_error("item ::= \"a\"", "the grammar has no 'root' rule");
  expect_error("", "the grammar has no 'root' rule");
  expect_error("# only a comment\n", "the grammar has no 'root' rule");
}

TEST(GbnfGrammar, TokenMatchesAreRefusedAsUnsupported) {
  for (const char* g : {"root ::= <think> \"x\"", "root ::= <[1000]>", "root ::= !<[1000]>*"})
    expect_error(g, "token matches (<[id]>, <text>, !<...>) are not supported",
                 ErrorKind::kUnsupported);
}

TEST(GbnfGrammar, LeftRecursionIsRefusedAndOtherRecursionRuns) {
  const char* expr = "root ::= expr\nexpr ::= expr \"+\" num | num\nnum ::= [0-9]";
  expect_error(expr, "line 2, column 1 (rule 'expr'): rule 'expr' is left-recursive",
               ErrorKind::kUnsupported);
  expect_error("root ::= a\na ::= b \"x\"\nb ::= a | \"y\"", "is left-recursive",
               ErrorKind::kUnsupported);
  // Through a prefix that may match nothing, and inside a group and a repeat.
  expect_error("root ::= opt root \"x\" | \"y\"\nopt ::= \"z\"?", "rule 'root' is left-recursive",
               ErrorKind::kUnsupported);
  expect_error("root ::= (root \"x\")* \"y\"", "rule 'root' is left-recursive",
               ErrorKind::kUnsupported);
  // Recursion after a character, or at the end of an alternative: the automaton runs them.
  run({
      {"root ::= \"x\" root | \"\"", {"", "xxx"}, {"y"}},
      {"root ::= \"a\" | root", {"a"}, {"", "aa"}},
      {"root ::= \"(\" root \")\" root | \"\"", {"", "()", "(())()"}, {"(", "())"}},
      {"root ::= (\"a\"?){0,3} \"b\"", {"b", "aaab"}, {"aaaab"}},
  });
}

// A repeat of what may match nothing: the same language as a repeat of its non-empty matches,
// which is how it is built, so that its empty matches do not fill the counts in ways that
// multiply with each repeat inside another.
TEST(GbnfGrammar, RepeatsOfWhatMayMatchNothing) {
  run({
      {"root ::= (\"a\"*)* \"b\"", {"b", "aab"}, {"a", "bb"}},
      {"root ::= \"<\" item+ \">\"\nitem ::= \"a\"? ws\nws ::= [ ]{0,2}",
       {"<>", "<a>", "<a  a a>", "<   >"},
       {"<", "<b>"}},
      {"root ::= x\nx ::= (\"a\" | \"\"){2,}", {"", "a", "aaa"}, {"b"}},
      {"root ::= (\"a\"? \"b\"?){2,3} \"!\"",
       {"!", "ab!", "abab!", "ababab!", "bbb!"},
       {"abababab!", "bbbb!", "aaaa!"}},
      {"root ::= (\"x\" e* | \"y\")+\ne ::= (\"e\" | \"\")", {"x", "xeey", "yxe"}, {"", "e"}},
  });
  const auto start = std::chrono::steady_clock::now();
  std::string nested = "root ::= " + std::string(8, '(') + "\"a\"?";
  for (int i = 0; i < 8; ++i) nested += "){0,5}";
  run({{nested, {"", "a", std::string(8, 'a')}, {"b"}},
       {"root ::= (\"1\" (\".\" [0-9]+)? " + std::string(100, '+') + ")",
        {"1", "1.5", "1.5.25"},
        {"", "1.", "11"}}});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// Repeats of repeats merge where that keeps the language (x?+ is x*), and nest otherwise.
TEST(GbnfGrammar, RepeatsOfRepeats) {
  run({
      {"root ::= \"a\"?+", {"", "a", "aaa"}, {"b"}},
      {"root ::= \"a\"{0,2}{3}", {"", "aaaaaa"}, {"aaaaaaa"}},
      {"root ::= \"a\"{1,2}{2,3}", {"aa", "aaaaaa"}, {"a", "aaaaaaa"}},
      {"root ::= \"a\"{2}{2,3}", {"aaaa", "aaaaaa"}, {"aa", "aaaaa", "aaaaaaaa"}},
      {"root ::= \"a\"{0}*", {""}, {"a"}},
      {"root ::= \"a\"{100}{101}", {std::string(10100, 'a')}, {std::string(10099, 'a')}},
  });
}

TEST(GbnfGrammar, HostileGrammarsFailFastWithAClearError) {
  const auto start = std::chrono::steady_clock::now();
  std::string deep = "root ::= " + std::string(300, '(') + "\"x\"" + std::string(300, ')');
  expect_error(deep, "groups are nested more than 256 deep");
  std::string nested = "root ::= " + std::string(200, '(') + "\"x\"" + std::string(200, ')');
  run({{nested, {"x"}, {""}}});
  expect_error("root ::= \"" + std::string((1 << 20) + 1, 'a') + "\"", "over the limit of");
  // Repeats of repeats cost their sum, not their product.
  const Grammar big = compile_gbnf("root ::= ((\"ab\"{10000}){10000}){10000}");
  EXPECT_LT(big.item_count(), 200'000u);
  // A grammar of many large repeats is bounded by the grammar's item limit.
  std::string many = "root ::= ";
  for (int i = 0; i < 500; ++i) many += "[^\"]{0,10000} ";
  expect_error(many, "too large");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

}  // namespace
}  // namespace strata::text::structured
