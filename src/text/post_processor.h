// Post-processors (tokenizer.json "post_processor"): what encode(add_special_tokens=true) adds
// around the ids of one sequence, e.g. a BOS token. TemplateProcessing, BertProcessing,
// RobertaProcessing, ByteLevel (nothing to add to ids) and Sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/json.h"

namespace strata::text {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids) const = 0;
};

// Builds the post-processor a tokenizer.json "post_processor" object describes; nullptr for null
// and for processors that add nothing to ids.
std::unique_ptr<PostProcessor> make_post_processor(const Json& spec);

// Adds fixed ids before and after the sequence (GGUF add_bos_token / add_eos_token).
std::unique_ptr<PostProcessor> make_affix_post_processor(std::vector<int32_t> prefix,
                                                         std::vector<int32_t> suffix);
// Runs `first` then `second` (either may be null).
std::unique_ptr<PostProcessor> chain_post_processors(std::unique_ptr<PostProcessor> first,
                                                     std::unique_ptr<PostProcessor> second);

}  // namespace strata::text
