// Engine: runs generation for one model: prefill the prompt, then decode token by token with the
// sampler until a stop condition. The state of each sequence lives in a Sequence.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/model.h"
#include "runtime/sampler.h"

namespace strata::runtime {

struct EngineOptions {
  int64_t context_size = 4096;  // tokens per sequence (prompt + generation)
  int64_t prefill_chunk = 512;  // prompt tokens per forward call
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
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 256;  // hard cap on emitted tokens (sampled + injected)
  SamplingParams sampling;
  std::vector<int32_t> stop_ids;  // end-of-generation tokens (not included in the output)
  TokenController* controller = nullptr;  // optional; not owned
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
  HostTensor logits_;
};

}  // namespace strata::runtime
