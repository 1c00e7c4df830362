// Renders every real chat template in ../shared/fixtures/chat-templates against every
// conversation, and checks the output byte for byte (or the error) against what Hugging Face
// transformers rendered with Jinja2 3.1.6.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "test_util.h"
#include "text/jinja/template.h"

namespace strata::text::jinja {
namespace {

using OrderedJson = nlohmann::ordered_json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string fixture_dir() { return test::shared_fixture("chat-templates"); }

std::vector<std::string> template_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(fixture_dir() + "/expected", ec)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The reference renders ran on 2026-11-21 (visible in the strftime_now outputs).
std::tm reference_now() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 10;
  tm.tm_mday = 21;
  tm.tm_hour = 12;
  return tm;
}

// Where two strings first differ, with some context, for a readable failure.
std::string first_difference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  size_t from = i > 40 ? i - 40 : 0;
  return "first difference at byte " + std::to_string(i) +
         "\n  got:  " + OrderedJson(got.substr(from, 120)).dump() +
         "\n  want: " + OrderedJson(want.substr(from, 120)).dump();
}

class ChatTemplateFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateFixture, MatchesJinja2Reference) {
  const std::string name = GetParam();
  const OrderedJson expected =
      OrderedJson::parse(read_file(fixture_dir() + "/expected/" + name + ".json"));
  const OrderedJson inputs =
      OrderedJson::parse(read_file(fixture_dir() + "/inputs.json"))["inputs"];
  Options options;
  options.now = reference_now;
  const Template tpl(
      read_file(fixture_dir() + "/templates/" + expected["template"].get<std::string>()), options);
  int passed = 0;
  int total = 0;
  for (const auto& c : expected["cases"]) {
    ++total;
    const std::string case_name = c["case"].get<std::string>();
    const OrderedJson& input = inputs["cases"][case_name];
    OrderedJson context = OrderedJson::object();
    context["messages"] = input["messages"];
    context["tools"] = input.contains("tools") ? input["tools"] : OrderedJson();
    context["documents"] = nullptr;
    context["add_generation_prompt"] = c["add_generation_prompt"];
    for (const auto& [k, v] : inputs["base_kwargs"].items()) context[k] = v;
    if (input.contains("kwargs")) {
      for (const auto& [k, v] : input["kwargs"].items()) context[k] = v;
    }
    const std::string label =
        case_name + (c["add_generation_prompt"].get<bool>() ? " +gen" : " -gen");
    try {
      std::string out = tpl.render(context);
      if (c.contains("error")) {
        ADD_FAILURE() << name << " / " << label << ": rendered, but the reference raised "
                      << c["error"].get<std::string>();
      } else if (out != c["output"].get<std::string>()) {
        ADD_FAILURE() << name << " / " << label << ": "
                      << first_difference(out, c["output"].get<std::string>());
      } else {
        ++passed;
      }
    } catch (const Error& e) {
      // Where Jinja2 raised, we must raise too, with the same Python-style message.
      const std::string want = c.contains("error") ? c["error"].get<std::string>() : "";
      if (!want.empty() && std::string_view(e.what()).substr(0, want.size()) == want) {
        ++passed;
      } else if (!want.empty()) {
        ADD_FAILURE() << name << " / " << label << ": raised \"" << e.what()
                      << "\", the reference raised \"" << want << "\"";
      } else {
        ADD_FAILURE() << name << " / " << label << ": raised " << e.what();
      }
    }
  }
  std::cout << "[ fixture  ] " << name << ": " << passed << "/" << total << " cases\n";
  EXPECT_EQ(passed, total);
}

INSTANTIATE_TEST_SUITE_P(ChatTemplates, ChatTemplateFixture, ::testing::ValuesIn(template_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(ChatTemplateFixtures, AllFortyNineTemplatesArePresent) {
  EXPECT_EQ(template_names().size(), 49u) << "fixture directory: " << fixture_dir();
}

}  // namespace
}  // namespace strata::text::jinja
