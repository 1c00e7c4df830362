// How a request may speculate and what its speculation did: plain data and the method names, apart
// from the drafters (runtime/speculative.h), so that request parsing needs no model code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace strata::runtime {

// How a request may speculate (GenerationRequest::speculative, EngineOptions::speculative).
struct SpeculativeParams {
  // kDraft: a draft model (EngineOptions::draft_model). kSelf: the model's own first layers,
  // then its final norm and head (model::Model::first_layers). kCustom: the caller's own Drafter
  // (GenerationRequest::drafter), not chosen by name.
  enum class Method { kDefault, kOff, kNgram, kDraft, kSelf, kCustom };
  Method method = Method::kDefault;  // kDefault: the engine's; for the engine, kDefault = off
  int64_t draft_max = 0;             // drafts per verify step; 0: the engine's (or 4)
  int64_t layers = 0;                // kSelf: the first layers that draft; 0: the engine's
  // Draft lengths that follow acceptance and cost (EngineOptions::speculative_adaptive); unset:
  // the engine's.
  std::optional<bool> adaptive = std::nullopt;
};
const char* speculative_method_name(SpeculativeParams::Method method);
// "ngram", "draft", "self", "off" (and "none"); anything else is an invalid_input Error.
SpeculativeParams::Method parse_speculative_method(const std::string& name);

// What a request's speculation did (GenerationResult::speculative).
struct SpeculativeStats {
  SpeculativeParams::Method method = SpeculativeParams::Method::kOff;
  int64_t drafted = 0;   // draft tokens verified
  int64_t accepted = 0;  // of them, those the model picked too and the request used
  int64_t steps = 0;     // verify steps
};

}  // namespace strata::runtime
