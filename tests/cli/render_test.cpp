// strata render end to end: the printed prompt is byte-identical to transformers' render of the
// real fixture templates (no newline added), request bodies and --kwargs work, and bad input exits
// with 1 (failed) or 2 (usage) and a clear message.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>

#include "core/json.h"
#include "core/mmap.h"
#include "cli_util.h"
#include "test_util.h"

namespace strata {
namespace {

using OrderedJson = nlohmann::ordered_json;

test::CliResult render(const std::string& args) { return test::strata_cli("render " + args, /*merge_stderr=*/false); }

std::string templates() { return test::shared_fixture("chat-templates"); }

OrderedJson fixture_case(const std::string& name) {
  return OrderedJson::parse(read_file(templates() + "/inputs.json"))["inputs"]["cases"][name];
}

std::string golden(const std::string& tpl, const std::string& case_name, bool gen) {
  const OrderedJson expected =
      OrderedJson::parse(read_file(templates() + "/expected/" + tpl + ".json"));
  for (const auto& c : expected["cases"]) {
    if (c["case"] == case_name && c["add_generation_prompt"] == gen) return c["output"];
  }
  return "<missing golden>";
}

TEST(CliRender, PrintsTheReferencePromptExactly) {
  const std::string dir = test::scratch_dir("render_exact");
  const OrderedJson input = fixture_case("tools_call_result");
  test::write_bytes(dir + "/messages.json", input["messages"].dump());
  test::write_bytes(dir + "/tools.json", input["tools"].dump());
  const std::string tpl = templates() + "/templates/Qwen3.5-4B.jinja";
  const test::CliResult with =
      render("--template " + tpl + " --messages " + dir + "/messages.json --tools " + dir +
             "/tools.json --add-generation-prompt");
  ASSERT_EQ(with.exit_code, 0) << with.err;
  EXPECT_EQ(with.out, golden("Qwen3.5-4B", "tools_call_result", true));
  const test::CliResult without = render("--template " + tpl + " --messages " + dir +
                                   "/messages.json --tools " + dir + "/tools.json");
  EXPECT_EQ(without.out, golden("Qwen3.5-4B", "tools_call_result", false));
}

TEST(CliRender, KwargsReachTheTemplate) {
  const std::string dir = test::scratch_dir("render_kwargs");
  test::write_bytes(dir + "/m.json", fixture_case("thinking_off")["messages"].dump());
  const test::CliResult r =
      render("--template " + templates() + "/templates/Qwen3.5-4B.jinja --messages " + dir +
             "/m.json --add-generation-prompt --kwargs '{\"enable_thinking\": false}'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, golden("Qwen3.5-4B", "thinking_off", true));
  // Llama 3.1 with the fixture's bos_token and date_string given as template variables.
  test::write_bytes(dir + "/u.json", fixture_case("system_user")["messages"].dump());
  const test::CliResult l = render("--template " + templates() +
                             "/templates/meta-llama-Llama-3.1-8B-Instruct.jinja --messages " + dir +
                             "/u.json --add-generation-prompt --kwargs '{\"bos_token\": \"<s>\", "
                             "\"date_string\": \"26 Jul 2024\"}'");
  ASSERT_EQ(l.exit_code, 0) << l.err;
  EXPECT_EQ(l.out, golden("meta-llama-Llama-3.1-8B-Instruct", "system_user", true));
}

TEST(CliRender, ModelDirectoryAndRequestBody) {
  const std::string dir = test::scratch_dir("render_model");
  test::write_bytes(
      dir + "/tokenizer_config.json",
      R"({"bos_token": "<B>", "chat_template": "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{% if enable_thinking is false %}(no think){% endif %}"})");
  test::write_bytes(dir + "/body.json", R"({"model": "x", "messages": [{"role": "user", "content":
      [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}], "reasoning_effort": "none"})");
  const test::CliResult r = render("--model " + dir + " --messages " + dir + "/body.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<B>[user:a\nb](no think)");
}

TEST(CliRender, ErrorsExitWithOneAndUsageErrorsWithTwo) {
  const std::string dir = test::scratch_dir("render_errors");
  const std::string tpl = templates() + "/templates/Qwen3.5-4B.jinja";
  test::write_bytes(dir + "/sys.json", R"([{"role": "system", "content": "s"}])");
  const test::CliResult raised = render("--template " + tpl + " --messages " + dir + "/sys.json");
  EXPECT_EQ(raised.exit_code, 1);
  EXPECT_NE(raised.err.find("No user query found in messages."), std::string::npos) << raised.err;
  EXPECT_EQ(raised.out, "");

  const test::CliResult missing = render("--template " + tpl + " --messages " + dir + "/nope.json");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("nope.json"), std::string::npos) << missing.err;

  test::write_bytes(dir + "/bad.json", "[{\"role\": ");
  const test::CliResult bad = render("--template " + tpl + " --messages " + dir + "/bad.json");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("invalid JSON"), std::string::npos) << bad.err;

  EXPECT_EQ(render("--messages " + dir + "/sys.json").exit_code, 2);  // no --model or --template
  EXPECT_EQ(render("--template " + tpl).exit_code, 2);                // no --messages
  const test::CliResult kw =
      render("--template " + tpl + " --messages " + dir + "/sys.json --kwargs '[1]'");
  EXPECT_EQ(kw.exit_code, 2);
  EXPECT_NE(kw.err.find("--kwargs"), std::string::npos) << kw.err;
}

}  // namespace
}  // namespace strata
