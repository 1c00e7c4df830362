// Engine: runs generation for one model: prefill the prompt, then decode token by token with the
// sampler until a stop condition. The state of each sequence lives in a Sequence.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/memory.h"
#include "core/tensor.h"
#include "model/model.h"
#include "runtime/sampler.h"

namespace strata::runtime {

struct EngineOptions {
  int64_t context_size = 4096;  // tokens per sequence (prompt + generation)
  int64_t prefill_chunk = 512;  // prompt tokens per forward call
  // Running ahead (generate()): the step of each picked token is queued before the host reads the
  // token, so that a GPU never waits for the host between steps. kAuto: on a GPU (on the CPU it
  // gains nothing and wastes the step after the last token); kOn: on the CPU too, picking tokens
  // with the backend's ops as a GPU does; kOff: never (the run_ahead setting off, to compare).
  enum class RunAhead { kAuto, kOn, kOff } run_ahead = RunAhead::kAuto;
};

enum class FinishReason { kStop, kLength, kCancelled };
const char* finish_reason_name(FinishReason reason);

// What a TokenController wants done with a sampled token.
struct ControlDecision {
  bool keep = true;             // emit the sampled token (false: drop it; then `inject` must not be empty)
  std::vector<int32_t> inject;  // tokens to emit after it, fed through the model as if generated
  bool stop = false;            // end generation after this step (with `reason`)
  FinishReason reason = FinishReason::kStop;
};

// A generation policy that watches the token stream (thinking budget, loop detector, ...): it sees
// each sampled token before it is emitted and may drop it, inject tokens after it, or stop.
// Injected tokens go to the TokenCallback and into GenerationResult::tokens like sampled ones.
class TokenController {
 public:
  virtual ~TokenController() = default;
  virtual ControlDecision on_sampled(int32_t token) = 0;
  virtual void on_injected(int32_t token) { (void)token; }
  // The model sampled one of the request's stop ids: nullopt ends the generation (on_sampled never
  // sees that token); a decision replaces the token instead (its keep must be false, and its
  // inject non-empty unless it stops).
  virtual std::optional<ControlDecision> on_end(int32_t token) {
    (void)token;
    return std::nullopt;
  }
};

// The model's log-probability of a sampled token (log-softmax of its raw logits, before sampling
// parameters), with the most likely alternatives.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // most likely first
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 256;  // hard cap on emitted tokens (sampled + injected)
  SamplingParams sampling;
  std::vector<int32_t> stop_ids;  // end-of-generation tokens (not included in the output)
  TokenController* controller = nullptr;  // optional; not owned
  // Log-probabilities: -1 off; 0..20 the sampled token's plus that many alternatives, passed to
  // on_logprob just before the token itself reaches the TokenCallback (injected tokens have none).
  int top_logprobs = -1;
  std::function<void(const TokenLogprob&)> on_logprob;
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // emitted tokens, injected ones included
  int64_t injected_tokens = 0;
  FinishReason finish_reason = FinishReason::kLength;
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
};

// Called with each generated token; return false to stop (cancel).
using TokenCallback = std::function<bool(int32_t)>;

class Engine {
 public:
  Engine(std::unique_ptr<model::Model> model, EngineOptions options);
  const model::Model& model() const { return *model_; }
  model::Model& model() { return *model_; }
  const EngineOptions& options() const { return options_; }

  GenerationResult generate(const GenerationRequest& request, const TokenCallback& on_token = {});

 private:
  std::unique_ptr<model::Model> model_;
  EngineOptions options_;
  HostTensor logits_;              // the last logits on the host (what the sampler reads)
  backend::Buffer device_logits_;  // where a GPU model writes them (empty for CPU models)
  // The tokens picked on the GPU (I32 [1] each, greedy or sampled) and their way back to the host:
  // two, so that one step's pick can be queued while the host reads the one before.
  backend::Buffer device_tokens_[2];
  backend::Readback readbacks_[2];
  // The sampler's logit edits (penalties, logit bias) applied to logits where they lie.
  void edit_on_device(Sampler& sampler, std::span<const int32_t> history, const Tensor& logits);
  Sampler::LogitEdits edits_;
  std::vector<int32_t> edit_words_;  // the edits as uploaded: ids, counts, the biases' bits
  backend::Buffer edit_buffer_;      // their device copy (grows, never shrinks)
  void log_softmax(std::span<const float> logits);
  void fill_logprob(int32_t token, int top, TokenLogprob& out) const;

  std::vector<float> logprobs_;  // log-softmax scratch (only when logprobs are asked for)
};

}  // namespace strata::runtime
