// The limited JSON parser: each limit accepted at its value and refused one past it, hostile
// documents (a million levels deep, 200k keys) refused fast and without a crash, large legal
// objects parsed in linear time, and the same document as nlohmann's own parser otherwise.
#include "core/json_limits.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/error.h"
#include "core/json.h"
#include "test_util.h"

namespace strata {
namespace {

using J = nlohmann::ordered_json;

std::string nested_arrays(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

std::string nested_objects(size_t depth) {
  std::string text;
  for (size_t i = 0; i < depth; ++i) text += "{\"k\":";
  text += "0";
  text += std::string(depth, '}');
  return text;
}

// {"k0": 0, "k1": 1, ...}
std::string object_with_keys(size_t n) {
  std::string text = "{";
  for (size_t i = 0; i < n; ++i)
    text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  return text + "}";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(JsonLimits, DepthSixtyFourIsAcceptedAndSixtyFiveRefused) {
  for (auto nested : {nested_arrays, nested_objects}) {
    const LimitedJson ok = parse_limited_json(nested(64));
    ASSERT_TRUE(ok.ok()) << ok.message;
    EXPECT_EQ(ok.value, J::parse(nested(64)));
    const LimitedJson deep = parse_limited_json(nested(65));
    EXPECT_EQ(deep.fault, JsonFault::kTooDeep);
    EXPECT_EQ(deep.message, "JSON nests deeper than 64 levels");
    EXPECT_TRUE(deep.value.is_null());
  }
  // A scalar alone is depth 0, so a limit of 0 still reads one.
  EXPECT_TRUE(parse_limited_json("7", {.max_depth = 0}).ok());
  EXPECT_EQ(parse_limited_json("[]", {.max_depth = 0}).fault, JsonFault::kTooDeep);
}

TEST(JsonLimits, MillionLevelDocumentsAreRefusedWithoutACrash) {
  for (size_t depth : {100'000u, 1'000'000u}) {
    EXPECT_EQ(parse_limited_json(nested_arrays(depth)).fault, JsonFault::kTooDeep) << depth;
    EXPECT_EQ(parse_limited_json(nested_objects(depth)).fault, JsonFault::kTooDeep) << depth;
    // Never closed: the depth is what stops it, before the missing brackets are seen.
    EXPECT_EQ(parse_limited_json(std::string(depth, '[')).fault, JsonFault::kTooDeep) << depth;
  }
}

TEST(JsonLimits, TwoHundredThousandKeysAreRefusedWithinASecond) {
  const std::string text = object_with_keys(200'000);
  const auto start = std::chrono::steady_clock::now();
  const LimitedJson r = parse_limited_json(text);
  EXPECT_LT(seconds_since(start), 1.0);
  EXPECT_EQ(r.fault, JsonFault::kTooManyKeys);
  EXPECT_EQ(r.message, "JSON object has more than 4096 keys");
}

TEST(JsonLimits, KeyAndValueLimitsHoldAtTheirValue) {
  EXPECT_TRUE(parse_limited_json(object_with_keys(4096)).ok());
  EXPECT_EQ(parse_limited_json(object_with_keys(4097)).fault, JsonFault::kTooManyKeys);
  // Repeated keys count as written: the limit bounds the work, not the result.
  std::string repeated = "{";
  for (int i = 0; i < 5000; ++i) repeated += i ? ",\"a\":1" : "\"a\":1";
  EXPECT_EQ(parse_limited_json(repeated + "}").fault, JsonFault::kTooManyKeys);
  // The root counts as a value: the root and n - 1 items fill a limit of n.
  const size_t n = JsonLimits{}.max_elements;
  auto zeros = [](size_t count) {
    std::string text = "[";
    for (size_t i = 0; i < count; ++i) text += i ? ",0" : "0";
    return text + "]";
  };
  EXPECT_TRUE(parse_limited_json(zeros(n - 1)).ok());
  const LimitedJson many = parse_limited_json(zeros(n));
  EXPECT_EQ(many.fault, JsonFault::kTooManyElements);
  EXPECT_EQ(many.message, "JSON document has more than 1048576 values");
  // Nested values count too: 3 arrays and 3 numbers.
  EXPECT_TRUE(parse_limited_json("[[1],[2,3]]", {.max_elements = 6}).ok());
  EXPECT_EQ(parse_limited_json("[[1],[2,3]]", {.max_elements = 5}).fault,
            JsonFault::kTooManyElements);
}

TEST(JsonLimits, LargeObjectsParseInLinearTime) {
  const std::string small = object_with_keys(4000);
  EXPECT_EQ(parse_limited_json(small).value, J::parse(small));
  // nlohmann's ordered object searches its keys on every insert: 200k keys take ~35 s that way,
  // 500k would take minutes. Built linearly, 500k keys take a fraction of a second.
  const JsonLimits raised{.max_object_keys = 1'000'000, .max_elements = 1'000'000};
  const std::string large = object_with_keys(500'000);
  const auto start = std::chrono::steady_clock::now();
  const LimitedJson r = parse_limited_json(large, raised);
  EXPECT_LT(seconds_since(start), 5.0);
  ASSERT_TRUE(r.ok()) << r.message;
  ASSERT_EQ(r.value.size(), 500'000u);
  EXPECT_EQ(r.value["k499999"], 499'999);
  EXPECT_EQ(r.value.begin().key(), "k0");
}

TEST(JsonLimits, RepeatedKeysKeepTheLastValueAtTheFirstPosition) {
  const std::string few = R"({"a": 1, "b": [2], "a": {"c": 3}, "b": null})";
  EXPECT_EQ(parse_limited_json(few).value, J::parse(few));
  EXPECT_EQ(parse_limited_json(few).value.dump(), R"({"a":{"c":3},"b":null})");
  // Past the size where an object gets a hash index, repeats before and after it.
  std::string many = "{";
  for (int i = 0; i < 100; ++i)
    many += "\"k" + std::to_string(i % 37) + "\":" + std::to_string(i) + ",";
  many += "\"k0\":\"last\"}";
  const LimitedJson r = parse_limited_json(many);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.value, J::parse(many));
  EXPECT_EQ(r.value.dump(), J::parse(many).dump());
  EXPECT_EQ(r.value.size(), 37u);
  EXPECT_EQ(r.value["k0"], "last");
}

TEST(JsonLimits, SameDocumentAsNlohmannForOrdinaryJson) {
  const char* documents[] = {
      "null",
      "true",
      "false",
      "0",
      "-0",
      "42",
      "-17",
      "18446744073709551615",
      "-9223372036854775808",
      "3.25",
      "-1.5e-7",
      "1E+300",
      "\"\"",
      R"("esc \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00")",
      "[]",
      "{}",
      " \n\t[ 1 , 2 ] \r\n",
      R"({"model": "m", "messages": [{"role": "user", "content": "Hi"}], "temperature": 0.5,
          "logit_bias": {"42": -100, "7": 2.5}, "stop": ["a", "b"], "stream": false,
          "tools": [{"type": "function", "function": {"name": "f", "parameters":
          {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}]})",
      R"({"z": 1, "a": 2, "m": {"y": [], "b": {}}, "unicode": "日本語"})",
      R"([[[[1]], [[2, [3, {"deep": [4]}]]]], {"": ""}])",
  };
  for (const char* text : documents) {
    const LimitedJson r = parse_limited_json(text);
    ASSERT_TRUE(r.ok()) << text << ": " << r.message;
    const J expected = J::parse(text);
    EXPECT_EQ(r.value, expected) << text;
    EXPECT_EQ(r.value.dump(), expected.dump()) << text;  // key order and number kinds too
    EXPECT_EQ(r.value.type(), expected.type()) << text;
  }
}

TEST(JsonLimits, InvalidJsonIsReportedAsInvalid) {
  for (const char* text :
       {"", " ", "{", "[1,]", "{\"a\" 1}", "{\"a\":}", "01", "1 2", "nul", "\"\\x\"", "\"open",
        "[1e999]", "{1: 2}", "[1] x", "'a'", "[[[[[[[[ oops"}) {
    const LimitedJson r = parse_limited_json(text);
    EXPECT_EQ(r.fault, JsonFault::kSyntax) << text;
    EXPECT_TRUE(r.message.starts_with("invalid JSON: ")) << r.message;
    EXPECT_EQ(r.message.find("[json.exception"), std::string::npos) << r.message;
    EXPECT_TRUE(r.value.is_null());
  }
}

TEST(JsonLimits, ThrowingFormNamesWhatWasParsed) {
  EXPECT_EQ(parse_limited_json_or_throw(R"({"a": [1]})", "body")["a"][0], 1);
  try {
    parse_limited_json_or_throw(nested_arrays(100'000), "request body");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_STREQ(e.what(), "request body: JSON nests deeper than 64 levels");
  }
  try {
    parse_limited_json_or_throw("{", "x.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_TRUE(std::string(e.what()).starts_with("x.json: invalid JSON: ")) << e.what();
  }
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Files (config.json, tokenizer.json) go through parse_json: as large as they come, but a file
// nested deeper than a request may be is a clear error, not a stack overflow later.
TEST(ParseJson, AFileNestedTooDeepIsAClearError) {
  const std::string ok = std::string(64, '[') + std::string(64, ']');
  EXPECT_TRUE(parse_json(ok, "ok.json").is_array());
  for (size_t depth : {65, 100000}) {
    const std::string deep = std::string(depth, '[') + std::string(depth, ']');
    test::expect_error([&] { parse_json(deep, "deep.json"); }, ErrorKind::kInvalidInput,
                       {"deep.json", "deeper than 64"});
  }
  test::expect_error([&] { parse_json("{\"a\": ", "cut.json"); }, ErrorKind::kInvalidInput,
                     {"cut.json", "invalid JSON"});
}

}  // namespace
}  // namespace strata
