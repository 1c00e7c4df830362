// Structured output: the cost per token of a JSON Schema constraint (the token mask from the
// matcher's state, then the matcher advanced on the token), along valid JSON texts tokenized by a
// real tokenizer. Cold: a fresh constraint (every state's mask walked once, then cached); warm: the
// same texts again through the same constraint (what a server's compiled-schema cache serves).
// Prints one markdown table of median and p99 µs per token, and the most work one mask or advance
// took (of text::structured::Automaton::kWorkBudget); asserts nothing.
//
// Usage: bench_structured [TOKENIZER_JSON ...]
//   default: the shared fixtures' qwen35 (151,936 ids) and gemma3 (262,144 ids) tokenizers
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "text/structured/json_schema.h"
#include "text/structured/token_mask.h"
#include "text/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
using OJ = nlohmann::ordered_json;
namespace st = strata::text::structured;

struct Case {
  const char* name;
  const char* schema;
  std::vector<const char*> texts;
};

const std::vector<Case> kCases = {
    {"flat object", R"({"type":"object","properties":{"name":{"type":"string"},
      "age":{"type":"integer"},"email":{"type":"string","format":"email"}},"required":["name","age","email"]})",
     {R"({"name": "Ada Lovelace", "age": 36, "email": "ada@example.org"})",
      R"({"name": "Grace Brewster Murray Hopper, rear admiral", "age": 85, "email": "grace.hopper@navy.mil"})"}},
    {"nested + enums", R"({"type":"object","properties":{"order":{"type":"object","properties":{
      "id":{"type":"string","format":"uuid"},"status":{"enum":["pending","shipped","delivered"]},
      "items":{"type":"array","minItems":1,"maxItems":5,"items":{"type":"object","properties":{
      "sku":{"type":"string","pattern":"^[A-Z]{3}-\\d{4}$"},"qty":{"type":"integer","minimum":1,"maximum":99}},
      "required":["sku","qty"]}}},"required":["id","status","items"]}},"required":["order"]})",
     {R"({"order": {"id": "123e4567-e89b-12d3-a456-426614174000", "status": "shipped", "items": [{"sku": "ABC-1234", "qty": 2}, {"sku": "XYZ-0001", "qty": 12}]}})"}},
    {"anyOf + $ref tree", R"({"$defs":{"node":{"type":"object","properties":{"label":{"type":"string"},
      "value":{"anyOf":[{"type":"number"},{"type":"string"},{"type":"null"}]},
      "children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["label","children"]}},
      "$ref":"#/$defs/node"})",
     {R"({"label": "root", "value": 1.5, "children": [{"label": "left", "value": "leaf text here", "children": []}, {"label": "right", "value": null, "children": [{"label": "deep", "children": []}]}]})"}},
    {"free text", R"({"type":"object","properties":{"summary":{"type":"string"},
      "keywords":{"type":"array","items":{"type":"string"}}},"required":["summary","keywords"]})",
     {R"({"summary": "The quick brown fox jumps over the lazy dog, and then it writes a long paragraph about structured output, token masks, pushdown automata and caches, in English prose with punctuation; numbers like 42 and 3.14 appear too.", "keywords": ["fox", "automaton", "mask", "cache"]})"}},
    {"json_object", nullptr,
     {R"({"anything": [1, 2, {"deep": true}], "text": "free-form string value", "n": -12.5e3})"}},
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> paths;
    for (int i = 1; i < argc; ++i) paths.push_back(argv[i]);
    if (paths.empty()) {
      const char* env = std::getenv("STRATA_SHARED_FIXTURES");
      const std::string root = env != nullptr ? env : "../shared/fixtures";
      paths = {root + "/tokenizers/qwen35/tokenizer.json", root + "/tokenizers/gemma3/tokenizer.json"};
    }
    std::printf("command: bench_structured");
    for (const std::string& p : paths) std::printf(" %s", p.c_str());
    std::printf("\ndevice: CPU, one thread\n\n");
    std::printf("| tokenizer | vocab | schema | tokens | cold median µs | cold p99 µs | warm median µs | warm p99 µs | states | max work |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (const std::string& path : paths) {
      auto tokenizer = strata::text::Tokenizer::load(path);
      auto vocab = st::Vocabulary::from_tokenizer(*tokenizer);
      std::vector<uint32_t> words(vocab->words());
      for (const Case& c : kCases) {
        const st::Grammar g = c.schema ? st::compile_json_schema(OJ::parse(c.schema))
                                       : st::any_json_object();
        auto constraint = std::make_shared<st::TokenConstraint>(g, vocab);
        std::vector<double> cold, warm;
        size_t tokens = 0;
        for (int pass = 0; pass < 21; ++pass) {
          for (const char* text : c.texts) {
            st::Matcher m(constraint);
            const std::vector<int32_t> ids = tokenizer->encode(text);
            if (pass == 0) tokens += ids.size() + 1;
            for (size_t k = 0; k <= ids.size(); ++k) {
              const auto t0 = Clock::now();
              m.mask(words);
              const bool ok = k == ids.size() ? m.accepts() : m.advance(ids[k]);
              const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
              if (!ok) strata::fail(strata::ErrorKind::kInternal, "'{}' refused its own text", c.name);
              (pass == 0 ? cold : warm).push_back(us);
            }
          }
        }
        const st::TokenConstraint::Stats stats = constraint->stats();
        std::printf("| %s | %zu | %s | %zu | %.1f | %.1f | %.1f | %.1f | %zu | %llu |\n",
                    path.substr(path.find("tokenizers/") == std::string::npos ? 0 : path.find("tokenizers/") + 11).c_str(),
                    vocab->size(), c.name, tokens, percentile(cold, 0.5), percentile(cold, 0.99),
                    percentile(warm, 0.5), percentile(warm, 0.99), stats.states,
                    static_cast<unsigned long long>(stats.max_work));
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_structured: %s\n", e.what());
    return 1;
  }
}
