// Normalizers (tokenizer.json "normalizer"): text rewrites applied to each non-added-token span
// before pre-tokenization: NFC/NFD/NFKC/NFKD, Lowercase, Strip, Replace, Prepend, Sequence.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/json.h"

namespace strata::text {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;  // text: valid UTF-8
};

// Builds the normalizer a tokenizer.json "normalizer" object describes; nullptr for JSON null.
// Throws Error(kInvalidInput) for a malformed spec, kUnsupported for an unknown type.
std::unique_ptr<Normalizer> make_normalizer(const Json& spec);

// Building blocks, also used to assemble GGUF tokenizers.
std::unique_ptr<Normalizer> make_prepend_normalizer(std::string prefix);
std::unique_ptr<Normalizer> make_replace_normalizer(std::string pattern, std::string content);
std::unique_ptr<Normalizer> make_nfc_normalizer();
std::unique_ptr<Normalizer> make_sequence_normalizer(
    std::vector<std::unique_ptr<Normalizer>> normalizers);

}  // namespace strata::text
