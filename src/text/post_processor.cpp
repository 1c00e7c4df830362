// The post-processor components and their construction from tokenizer.json.
#include "text/post_processor.h"

#include "core/error.h"
#include "text/json_spec.h"

namespace strata::text {

namespace {

class AffixPostProcessor : public PostProcessor {
 public:
  AffixPostProcessor(std::vector<int32_t> prefix, std::vector<int32_t> suffix)
      : prefix_(std::move(prefix)), suffix_(std::move(suffix)) {}
  void process(std::vector<int32_t>& ids) const override {
    ids.insert(ids.begin(), prefix_.begin(), prefix_.end());
    ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  }

 private:
  std::vector<int32_t> prefix_, suffix_;
};

class SequencePostProcessor : public PostProcessor {
 public:
  explicit SequencePostProcessor(std::vector<std::unique_ptr<PostProcessor>> parts)
      : parts_(std::move(parts)) {}
  void process(std::vector<int32_t>& ids) const override {
    for (const auto& part : parts_) part->process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

// TemplateProcessing "single": a list of {"SpecialToken": {"id": name}} and {"Sequence": ..}.
std::unique_ptr<PostProcessor> make_template(const Json& spec) {
  const Json& single = spec_field(spec, "single");
  const Json& specials = spec.contains("special_tokens") ? spec["special_tokens"] : Json::object();
  if (!single.is_array()) {
    fail(ErrorKind::kInvalidInput, "tokenizer: TemplateProcessing.single must be an array");
  }
  std::vector<int32_t> prefix, suffix;
  bool seen_sequence = false;
  for (const Json& item : single) {
    if (item.is_object() && item.contains("Sequence")) {
      if (seen_sequence) {
        fail(ErrorKind::kInvalidInput, "tokenizer: TemplateProcessing.single repeats the sequence");
      }
      seen_sequence = true;
      continue;
    }
    if (!item.is_object() || !item.contains("SpecialToken")) {
      fail(ErrorKind::kInvalidInput, "tokenizer: bad TemplateProcessing item {}", item.dump());
    }
    const std::string name = spec_string(item["SpecialToken"], "id");
    auto it = specials.is_object() ? specials.find(name) : specials.end();
    if (it == specials.end()) {
      fail(ErrorKind::kInvalidInput,
           "tokenizer: TemplateProcessing uses '{}', which special_tokens does not define", name);
    }
    const Json& ids = spec_field(*it, "ids");
    if (!ids.is_array()) {
      fail(ErrorKind::kInvalidInput, "tokenizer: special_tokens['{}'].ids must be an array", name);
    }
    for (const Json& id : ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0) {
        fail(ErrorKind::kInvalidInput, "tokenizer: special_tokens['{}'] has a bad id", name);
      }
      (seen_sequence ? suffix : prefix).push_back(id.get<int32_t>());
    }
  }
  return make_affix_post_processor(std::move(prefix), std::move(suffix));
}

// Bert/Roberta: {"cls": [token, id], "sep": [token, id]}.
int32_t pair_id(const Json& spec, const char* key) {
  const Json& pair = spec_field(spec, key);
  if (!pair.is_array() || pair.size() != 2 || !pair[1].is_number_integer()) {
    fail(ErrorKind::kInvalidInput, "tokenizer: post_processor.{} must be [token, id]", key);
  }
  return pair[1].get<int32_t>();
}

}  // namespace

std::unique_ptr<PostProcessor> make_affix_post_processor(std::vector<int32_t> prefix,
                                                         std::vector<int32_t> suffix) {
  return std::make_unique<AffixPostProcessor>(std::move(prefix), std::move(suffix));
}

std::unique_ptr<PostProcessor> chain_post_processors(std::unique_ptr<PostProcessor> first,
                                                     std::unique_ptr<PostProcessor> second) {
  if (!first) return second;
  if (!second) return first;
  std::vector<std::unique_ptr<PostProcessor>> parts;
  parts.push_back(std::move(first));
  parts.push_back(std::move(second));
  return std::make_unique<SequencePostProcessor>(std::move(parts));
}

std::unique_ptr<PostProcessor> make_post_processor(const Json& spec) {
  if (spec.is_null()) return nullptr;
  const std::string type = spec_type(spec, "post_processor");
  if (type == "ByteLevel") return nullptr;  // only adjusts offsets
  if (type == "TemplateProcessing") return make_template(spec);
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    return make_affix_post_processor({pair_id(spec, "cls")}, {pair_id(spec, "sep")});
  }
  if (type == "Sequence") {
    const Json& list = spec_field(spec, "processors");
    if (!list.is_array()) {
      fail(ErrorKind::kInvalidInput, "tokenizer: Sequence.processors must be an array");
    }
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (const Json& item : list) {
      if (auto p = make_post_processor(item)) parts.push_back(std::move(p));
    }
    return std::make_unique<SequencePostProcessor>(std::move(parts));
  }
  fail(ErrorKind::kUnsupported, "tokenizer: post_processor type '{}' is not supported", type);
}

}  // namespace strata::text
