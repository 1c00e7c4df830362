// Checks the Jinja engine against Jinja2 on the small language cases in jinja_goldens.json
// (made by tools/make_jinja_goldens.py with Jinja2 configured as Hugging Face transformers does).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "text/jinja/template.h"

namespace strata::text::jinja {
namespace {

using OrderedJson = nlohmann::ordered_json;

const OrderedJson& goldens() {
  static const OrderedJson kGoldens = [] {
    const auto path = std::filesystem::path(__FILE__).parent_path() / "jinja_goldens.json";
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return OrderedJson::parse(ss.str());
  }();
  return kGoldens;
}

std::vector<std::string> groups() {
  std::vector<std::string> out;
  for (const auto& c : goldens()["cases"]) {
    std::string g = c["group"].get<std::string>();
    if (std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
  }
  return out;
}

std::tm golden_clock() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 10;
  tm.tm_mday = 21;
  tm.tm_hour = 12;
  return tm;
}

class JinjaGolden : public ::testing::TestWithParam<std::string> {};

// Where Jinja2 rendered, the output is byte-identical; where it raised, strata raises a
// strata::Error whose message starts with the same Python exception type.
TEST_P(JinjaGolden, MatchesJinja2) {
  int checked = 0;
  for (const auto& c : goldens()["cases"]) {
    if (c["group"] != GetParam()) continue;
    ++checked;
    const std::string name = c["name"].get<std::string>();
    const std::string source = c["template"].get<std::string>();
    Options options;
    options.now = golden_clock;
    std::string output;
    std::string error;
    try {
      output = Template(source, options).render(c["context"]);
    } catch (const Error& e) {
      error = e.what();
    }
    if (c.contains("output")) {
      EXPECT_TRUE(error.empty()) << name << "\n  template: " << source << "\n  raised: " << error;
      EXPECT_EQ(output, c["output"].get<std::string>()) << name << "\n  template: " << source;
    } else {
      const std::string want = c["error"].get<std::string>();
      const std::string want_type = want.substr(0, want.find(':'));
      EXPECT_EQ(error.substr(0, error.find(':')), want_type)
          << name << "\n  template: " << source << "\n  want: " << want
          << "\n  got: " << (error.empty() ? "output " + output : error);
    }
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Language, JinjaGolden, ::testing::ValuesIn(groups()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace strata::text::jinja
