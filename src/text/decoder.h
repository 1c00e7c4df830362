// Decoders (tokenizer.json "decoder"): turn the pieces of a list of ids back into text.
// ByteLevel, ByteFallback, Fuse, Replace, Strip, Metaspace, BPEDecoder and Sequence, each with
// Hugging Face's decode_chain semantics (a list of strings in, a list of strings out).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/json.h"

namespace strata::text {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// Builds the decoder a tokenizer.json "decoder" object describes; nullptr for null.
std::unique_ptr<Decoder> make_decoder(const Json& spec);

// Building blocks for GGUF tokenizers.
std::unique_ptr<Decoder> make_byte_level_decoder();
// SentencePiece style: "▁" -> " ", <0xNN> -> bytes, joined, one leading space stripped.
std::unique_ptr<Decoder> make_sentencepiece_decoder(bool strip_leading_space);

}  // namespace strata::text
