// The settings registry: a flag beats the environment, which beats the default; values are parsed
// by type and a bad one is an error naming where it came from; the JSON dump says where each value
// came from; every row of the table is complete and documented. Environments are explicit maps:
// no test touches the process's own.
#include "core/settings.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/error.h"
#include "core/mmap.h"
#include "test_util.h"

namespace strata {
namespace {

const SettingSpec& spec_named(std::string_view name) {
  for (const SettingSpec& spec : setting_specs())
    if (spec.name == name) return spec;
  throw std::runtime_error("no setting " + std::string(name));
}

// The default of each setting as text, as a flag or variable would give it.
std::string default_text(const SettingSpec& spec) {
  const nlohmann::ordered_json value = Settings{}.to_json()[std::string(spec.name)]["value"];
  return value.is_string() ? value.get<std::string>() : value.dump();
}

TEST(Settings, NothingGivenMeansEveryDefault) {
  const Settings s = resolve_settings({}, {});
  const Settings defaults;
  EXPECT_EQ(s.to_json(), defaults.to_json());
  EXPECT_EQ(s.device, "auto");
  EXPECT_EQ(s.ctx_size, 0);
  EXPECT_TRUE(s.cuda_graphs);
  EXPECT_EQ(s.cuda_feeds, 15);
  for (const SettingSpec& spec : setting_specs())
    EXPECT_EQ(s.source(spec.name), SettingSource::kDefault) << spec.name;
}

TEST(Settings, AFlagBeatsTheEnvironmentWhichBeatsTheDefault) {
  const Settings s = resolve_settings(
      {{"device", "cpu"}, {"ctx_size", "2048"}},
      {{"STRATA_DEVICE", "cuda"}, {"STRATA_KV_CACHE_TYPE", "bf16"}, {"STRATA_UNRELATED", "x"}});
  EXPECT_EQ(s.device, "cpu");
  EXPECT_EQ(s.source("device"), SettingSource::kFlag);
  EXPECT_EQ(s.ctx_size, 2048);
  EXPECT_EQ(s.source("ctx_size"), SettingSource::kFlag);
  EXPECT_EQ(s.kv_cache_type, "bf16");
  EXPECT_EQ(s.source("kv_cache_type"), SettingSource::kEnvironment);
  EXPECT_EQ(s.model, "");
  EXPECT_EQ(s.source("model"), SettingSource::kDefault);
}

TEST(Settings, AnEmptyValueCountsAsNotGiven) {
  const Settings s =
      resolve_settings({{"model", ""}}, {{"STRATA_MODEL", "/models/a"}, {"STRATA_DEVICE", ""}});
  EXPECT_EQ(s.model, "/models/a");
  EXPECT_EQ(s.source("model"), SettingSource::kEnvironment);
  EXPECT_EQ(s.device, "auto");
  EXPECT_EQ(s.source("device"), SettingSource::kDefault);
}

TEST(Settings, EachTypeIsParsed) {
  const Settings s = resolve_settings({}, {{"STRATA_MODEL", "/models/qwen"},
                                           {"STRATA_CUDA_GRAPHS", "0"},
                                           {"STRATA_RUN_AHEAD", "Off"},
                                           {"STRATA_CUDA_PDL", "false"},
                                           {"STRATA_MOE_FOLD_SHARED", "no"},
                                           {"STRATA_CTX_SIZE", "8192"},
                                           {"STRATA_GEMV_ROW_WARPS", "4"},
                                           {"STRATA_CUDA_FEEDS", "5"},
                                           {"STRATA_CUDA_GEMV", "cores"}});
  EXPECT_EQ(s.model, "/models/qwen");
  EXPECT_FALSE(s.cuda_graphs);
  EXPECT_FALSE(s.run_ahead);
  EXPECT_FALSE(s.cuda_pdl);
  EXPECT_FALSE(s.moe_fold_shared);
  EXPECT_EQ(s.ctx_size, 8192);
  EXPECT_EQ(s.gemv_row_warps, 4);
  EXPECT_EQ(s.cuda_feeds, 5);
  EXPECT_EQ(s.cuda_gemv, "cores");
}

TEST(Settings, BooleansTakeTheUsualSpellingsInAnyCase) {
  const SettingSpec& spec = spec_named("cuda_graphs");
  for (const char* yes : {"1", "true", "TRUE", "on", "On", "yes"})
    EXPECT_EQ(parse_setting_value(spec, yes, "X"), SettingValue(true)) << yes;
  for (const char* no : {"0", "false", "False", "off", "OFF", "no"})
    EXPECT_EQ(parse_setting_value(spec, no, "X"), SettingValue(false)) << no;
}

TEST(Settings, FloatsAreParsedWhole) {
  const SettingSpec spec{.name = "ratio", .type = SettingType::kDouble, .env = "STRATA_RATIO"};
  EXPECT_EQ(parse_setting_value(spec, "0.25", "STRATA_RATIO"), SettingValue(0.25));
  EXPECT_EQ(parse_setting_value(spec, "-1e-3", "STRATA_RATIO"), SettingValue(-1e-3));
  for (const char* bad : {"", "0.5x", "nan", "inf", "1,5"})
    test::expect_error([&] { parse_setting_value(spec, bad, "STRATA_RATIO"); },
                       ErrorKind::kInvalidInput, {"STRATA_RATIO", "not a finite number"});
}

TEST(Settings, ABadValueIsAnErrorNamingItsVariableOrFlag) {
  struct Case {
    std::string variable, value, says;
  };
  const Case cases[] = {
      {"STRATA_CUDA_GRAPHS", "maybe", "not a boolean"},
      {"STRATA_CTX_SIZE", "12x", "not an integer"},
      {"STRATA_CTX_SIZE", "1.5", "not an integer"},
      {"STRATA_CTX_SIZE", " 12", "not an integer"},
      {"STRATA_CTX_SIZE", "99999999999999999999", "out of range"},
      {"STRATA_CTX_SIZE", "-1", "below the minimum, 0"},
      {"STRATA_CUDA_FEEDS", "16", "above the maximum, 15"},
      {"STRATA_GDN_SPLIT", "3", "not one of 0, 1, 2, 4, 8"},
      {"STRATA_DEVICE", "gpu", "not one of auto, cpu, cuda"},
      {"STRATA_CUDA_GEMV", "Cores", "not one of tensor-cores, cores"},
  };
  for (const Case& c : cases)
    test::expect_error(
        [&] {
          resolve_settings({}, {{c.variable, c.value}});
        },
        ErrorKind::kInvalidInput, {c.variable + ": ", c.says});
  test::expect_error(
      [] {
        resolve_settings({{"kv_cache_type", "f16"}}, {});
      },
      ErrorKind::kInvalidInput, {"--kv-cache-type: ", "not one of auto, f32, bf16"});
  // A variable that a flag overrides is not read.
  EXPECT_EQ(resolve_settings({{"device", "cpu"}}, {{"STRATA_DEVICE", "gpu"}}).device, "cpu");
}

TEST(Settings, AFlagForNoSettingIsABug) {
  test::expect_error(
      [] {
        resolve_settings({{"no_such_setting", "1"}}, {});
      },
      ErrorKind::kInternal, {"no_such_setting"});
  // cuda_graphs has no command-line flag.
  test::expect_error(
      [] {
        resolve_settings({{"cuda_graphs", "0"}}, {});
      },
      ErrorKind::kInternal, {"cuda_graphs"});
}

TEST(Settings, JsonGivesEachValueAndWhereItCameFrom) {
  const Settings s = resolve_settings({{"ctx_size", "1024"}}, {{"STRATA_CUDA_GRAPHS", "off"}});
  const nlohmann::ordered_json j = s.to_json();
  ASSERT_EQ(j.size(), setting_specs().size());
  size_t i = 0;
  for (const auto& [name, entry] : j.items()) {  // the table's order
    EXPECT_EQ(name, setting_specs()[i++].name);
    EXPECT_EQ(entry.size(), 2u) << name;
  }
  EXPECT_EQ(j["ctx_size"], (nlohmann::ordered_json{{"value", 1024}, {"source", "flag"}}));
  EXPECT_EQ(j["cuda_graphs"], (nlohmann::ordered_json{{"value", false}, {"source", "env"}}));
  EXPECT_EQ(j["device"], (nlohmann::ordered_json{{"value", "auto"}, {"source", "default"}}));
  EXPECT_TRUE(j["cuda_feeds"]["value"].is_number_integer());
}

TEST(Settings, EveryRowIsCompleteAndItsDefaultIsAValue) {
  std::set<std::string_view> names, variables, flags;
  for (const SettingSpec& spec : setting_specs()) {
    SCOPED_TRACE(spec.name);
    EXPECT_TRUE(names.insert(spec.name).second);
    EXPECT_TRUE(variables.insert(spec.env).second);
    if (!spec.flag.empty()) {
      EXPECT_TRUE(flags.insert(spec.flag).second);
    }
    EXPECT_EQ(spec.env.rfind("STRATA_", 0), 0u);
    EXPECT_FALSE(spec.help.empty());
    if (spec.type == SettingType::kEnum) {
      EXPECT_FALSE(spec.choices.empty());
    }
    if (!spec.choices.empty()) {
      EXPECT_TRUE(spec.type == SettingType::kEnum || spec.type == SettingType::kInt);
    }
    // The default, given back as text, is a value of the row's type and allowed, and the member
    // is of that type (resolve_settings would refuse to store it otherwise). An empty default
    // (the built-in model) reads as not given, which is the same.
    const std::string name(spec.name), text = default_text(spec);
    const Settings s = resolve_settings({}, {{std::string(spec.env), text}});
    EXPECT_EQ(s.source(spec.name),
              text.empty() ? SettingSource::kDefault : SettingSource::kEnvironment);
    EXPECT_EQ(s.to_json()[name]["value"], Settings{}.to_json()[name]["value"]);
  }
}

TEST(Settings, EnvironmentMapReadsAnEnvironBlock) {
  const char* block[] = {"STRATA_DEVICE=cpu", "EQUALS=a=b", "EMPTY=", "NO_EQUALS", nullptr};
  const SettingMap env = environment_map(block);
  EXPECT_EQ(env, (SettingMap{{"STRATA_DEVICE", "cpu"}, {"EQUALS", "a=b"}, {"EMPTY", ""}}));
}

TEST(Settings, EveryVariableIsInTheConfigurationDoc) {
  const std::string doc = read_file(test::test_fixture("../../docs/CONFIGURATION.md"));
  for (const SettingSpec& spec : setting_specs()) {
    EXPECT_NE(doc.find(fmt::format("`{}`", spec.env)), std::string::npos) << spec.env;
    if (!spec.flag.empty()) {
      EXPECT_NE(doc.find(fmt::format("`{}`", spec.flag)), std::string::npos) << spec.flag;
    }
  }
}

}  // namespace
}  // namespace strata
