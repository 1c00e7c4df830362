// The Template API beyond Jinja2 parity: error reporting, the sandbox limits of Options, the
// clock override, context key order, mutation policy, and safety on hostile templates.
#include "text/jinja/template.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace strata::text::jinja {
namespace {

using OrderedJson = nlohmann::ordered_json;

std::string render(std::string_view source, const OrderedJson& context = OrderedJson::object(),
                   Options options = {}) {
  return Template(source, std::move(options)).render(context);
}

// The message of the strata::Error that parsing or rendering raises ("" if none).
std::string error_of(std::string_view source, Options options = {},
                     const OrderedJson& context = OrderedJson::object()) {
  try {
    Template(source, std::move(options)).render(context);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    return e.what();
  }
  return "";
}

TEST(JinjaTemplate, SyntaxErrorsReportLineAndColumn) {
  std::string msg = error_of("line one\n{{ 1 + }}");
  EXPECT_NE(msg.find("TemplateSyntaxError"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 2, column 8"), std::string::npos) << msg;
  msg = error_of("{% for x in y %}\n{% endif %}");
  EXPECT_NE(msg.find("Encountered unknown tag 'endif'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 2"), std::string::npos) << msg;
}

TEST(JinjaTemplate, SyntaxErrorsThrowFromTheConstructor) {
  EXPECT_THROW(Template("{% if %}"), Error);
  EXPECT_THROW(Template("{{ x|no_such_filter }}"), Error);
  EXPECT_NO_THROW(Template("{% if false %}{{ x|no_such_filter }}{% endif %}"));
}

TEST(JinjaTemplate, RuntimeErrorsLookLikePythonAndNameTheLine) {
  EXPECT_EQ(error_of("a\nb\n{{ raise_exception('No user query found in messages.') }}"),
            "TemplateError: No user query found in messages. (template line 3)");
  EXPECT_EQ(error_of("{{ 'a' + [1] }}"),
            "TypeError: can only concatenate str (not \"list\") to str (template line 1)");
  EXPECT_EQ(error_of("{% macro m() %}\n\n{{ x.y }}{% endmacro %}\n{{ m() }}"),
            "UndefinedError: 'x' is undefined (template line 3)");
}

TEST(JinjaTemplate, LoopIterationLimitStopsRunawayLoops) {
  Options options;
  options.max_loop_iterations = 110;
  EXPECT_EQ(render("{% for i in range(110) %}.{% endfor %}", {}, options).size(), 110u);
  // The limit counts every iteration of every loop in the render: 10 + 10 * 10 = 110.
  const char* nested = "{% for i in range(N) %}{% for j in range(10) %}{% endfor %}{% endfor %}";
  auto with_n = [&](const char* n) {
    std::string s = nested;
    s.replace(s.find('N'), 1, n);
    return s;
  };
  EXPECT_EQ(error_of(with_n("10"), options), "");
  std::string msg = error_of(with_n("11"), options);
  EXPECT_NE(msg.find("loop iteration limit exceeded (110)"), std::string::npos) << msg;
}

TEST(JinjaTemplate, RecursionLimitStopsRunawayMacros) {
  std::string msg = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(msg.find("RecursionError"), std::string::npos) << msg;
  Options options;
  options.max_recursion_depth = 5;
  const char* countdown =
      "{% macro f(n) %}{{ n }}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}";
  EXPECT_EQ(render(std::string(countdown) + "{{ f(4) }}", {}, options), "43210");
  EXPECT_NE(error_of(std::string(countdown) + "{{ f(5) }}", options).find("RecursionError"),
            std::string::npos);
}

TEST(JinjaTemplate, OutputLimitStopsRunawayOutput) {
  Options options;
  options.max_output_bytes = 1000;
  EXPECT_EQ(render("{% for i in range(100) %}0123456789{% endfor %}", {}, options).size(), 1000u);
  std::string msg = error_of("{% for i in range(101) %}0123456789{% endfor %}", options);
  EXPECT_NE(msg.find("output exceeds the limit of 1000 bytes"), std::string::npos) << msg;
  // Captured output (macros, set blocks) and built strings are bounded too.
  EXPECT_NE(error_of("{{ 'x' * 2000 }}", options).find("MemoryError"), std::string::npos);
  EXPECT_NE(
      error_of("{% set s %}{% for i in range(200) %}0123456789{% endfor %}{% endset %}", options)
          .find("output exceeds"),
      std::string::npos);
  EXPECT_NE(error_of("{{ 'ab' * 1000000000000 }}").find("MemoryError"), std::string::npos);
  EXPECT_NE(error_of("{{ [1, 2] * 100000000 }}").find("MemoryError"), std::string::npos);
}

TEST(JinjaTemplate, OperationLimitStopsExpensiveTemplates) {
  Options options;
  options.max_operations = 10000;
  std::string msg = error_of(
      "{% for i in range(100) %}{% for j in range(100) %}{{ i * j }}{% endfor %}{% endfor %}",
      options);
  EXPECT_NE(msg.find("operation limit"), std::string::npos) << msg;
  // Filters walking big sequences count per element, not per call.
  msg = error_of("{% for i in range(20) %}{% set s = range(20000)|list|sort %}{% endfor %}");
  EXPECT_EQ(msg, "");
  options.max_operations = 1'000'000;
  msg =
      error_of("{% for i in range(20) %}{% set s = range(20000)|list|sort %}{% endfor %}", options);
  EXPECT_NE(msg.find("operation limit"), std::string::npos) << msg;
}

TEST(JinjaTemplate, DeepNestingFailsCleanly) {
  std::string deep_parens = std::string(5000, '(') + "1" + std::string(5000, ')');
  EXPECT_NE(error_of("{{ " + deep_parens + " }}").find("TemplateSyntaxError"), std::string::npos);
  std::string long_chain = "{{ 1";
  for (int i = 0; i < 10000; ++i) long_chain += " + 1";
  EXPECT_NE(error_of(long_chain + " }}").find("nested too deeply"), std::string::npos);
  std::string deep_ifs;
  for (int i = 0; i < 1000; ++i) deep_ifs += "{% if true %}";
  EXPECT_NE(error_of(deep_ifs).find("TemplateSyntaxError"), std::string::npos);
  // A deeply nested context value is rejected rather than overflowing the stack.
  const OrderedJson deep =
      OrderedJson::parse("{\"x\": " + std::string(20000, '[') + std::string(20000, ']') + "}");
  EXPECT_THROW(render("{{ x }}", deep), Error);
}

TEST(JinjaTemplate, StrftimeNowUsesTheClockOverride) {
  Options options;
  options.now = [] {
    std::tm tm{};
    tm.tm_year = 2024 - 1900;
    tm.tm_mon = 6;
    tm.tm_mday = 26;
    return tm;
  };
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }} {{ strftime_now('%A') }}", {}, options),
            "26 Jul 2024 Friday");
  EXPECT_EQ(render("{{ strftime_now('%Y') | length }}"), "4");  // the system clock by default
}

TEST(JinjaTemplate, OrderedJsonContextKeepsKeyOrder) {
  const char* tools = R"({"tools": [{"type": "function", "function": {"name": "f",
      "description": "d", "parameters": {"type": "object", "properties": {}}}}]})";
  EXPECT_EQ(render("{{ tools[0]|tojson }}", OrderedJson::parse(tools)),
            R"({"type": "function", "function": {"name": "f", "description": "d", )"
            R"("parameters": {"type": "object", "properties": {}}}})");
  // strata::Json iterates objects in sorted key order.
  EXPECT_EQ(Template("{{ d|tojson }}").render(Json::parse(R"({"d": {"b": 1, "a": 2}})")),
            R"({"a": 2, "b": 1})");
}

TEST(JinjaTemplate, ContextMustBeAnObject) {
  EXPECT_THROW(Template("x").render(OrderedJson::array()), Error);
  EXPECT_EQ(Template("x{{ y }}").render(OrderedJson()), "x");  // null: no variables
}

TEST(JinjaTemplate, MutatingMethodsFollowTheMutationPolicy) {
  const char* source =
      "{% set l = [] %}{% set d = {} %}{{ l.append(1) }}{{ d.update({'a': 1}) }}"
      "{{ l.pop(0) }}{{ d.setdefault('b', 2) }}{{ l }}{{ d }}";
  EXPECT_NE(error_of(source).find("SecurityError: access to attribute 'append' of 'list' object"),
            std::string::npos);
  Options options;
  options.allow_mutation = true;
  EXPECT_EQ(render(source, {}, options), "NoneNone12[]{'a': 1, 'b': 2}");
}

TEST(JinjaTemplate, SelfReferencesDoNotCrashOrLeak) {
  Options options;
  options.allow_mutation = true;
  EXPECT_NE(error_of("{% set l = [] %}{{ l.append(l) }}{{ l }}", options).find("RecursionError"),
            std::string::npos);
  EXPECT_NE(error_of("{% set l = [] %}{{ l.append(l) }}{{ l|tojson }}", options)
                .find("Circular reference detected"),
            std::string::npos);
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me.me is defined }}"),
            "True");
}

TEST(JinjaTemplate, WhitespaceOptionsCanBeTurnedOff) {
  Options options;
  options.trim_blocks = false;
  options.lstrip_blocks = false;
  EXPECT_EQ(render("  {% if true %}\nx\n  {% endif %}\ny", {}, options), "  \nx\n  \ny");
  EXPECT_EQ(render("  {% if true %}\nx\n  {% endif %}\ny"), "x\ny");
}

TEST(JinjaTemplate, RendersConcurrentlyFromOneTemplate) {
  const Template tpl(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
      "<{{ m.role }}>{{ m.content }}{% endfor %}{{ ns.n }}");
  std::vector<std::thread> threads;
  std::vector<std::string> outputs(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      OrderedJson ctx = {{"messages", OrderedJson::array()}};
      for (int i = 0; i <= t; ++i) ctx["messages"].push_back({{"role", "user"}, {"content", i}});
      for (int rep = 0; rep < 200; ++rep) outputs[t] = tpl.render(ctx);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(outputs[0], "<user>01");
  EXPECT_EQ(outputs[3], "<user>0<user>1<user>2<user>34");
}

TEST(JinjaTemplate, InvalidUtf8PassesThroughUnchanged) {
  const std::string bytes = "a\xff\xfe b\xc3";
  EXPECT_EQ(render("{{ s }}|{{ s|upper }}|{{ s[1:] }}", {{"s", bytes}}),
            bytes + "|A\xff\xfe B\xc3|\xff\xfe b\xc3");
  EXPECT_EQ(render(bytes + "{{ 1 }}"), bytes + "1");
}

}  // namespace
}  // namespace strata::text::jinja
