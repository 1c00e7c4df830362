// Engine implementation: chunked prefill, then the decode loop.
#include "runtime/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "backend/ops.h"
#include "core/error.h"
#include "runtime/sequence.h"

namespace strata::runtime {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
  }
  return "stop";
}

Engine::Engine(std::unique_ptr<model::Model> model, EngineOptions options)
    : model_(std::move(model)), options_(options),
      logits_(DType::kF32, {model_->config().vocab_size}),
      readbacks_{backend::Readback(model_->device()), backend::Readback(model_->device())} {
  if (model_->device() != Device::kCpu)
    device_logits_ = backend::Buffer(model_->device(), DType::kF32, {model_->config().vocab_size});
  for (backend::Buffer& b : device_tokens_) b = backend::Buffer(model_->device(), DType::kI32, {1});
  check(options_.context_size > 0 && options_.prefill_chunk > 0, ErrorKind::kInvalidInput,
        "context size and prefill chunk must be positive");
}

GenerationResult Engine::generate(const GenerationRequest& request, const TokenCallback& on_token) {
  using Clock = std::chrono::steady_clock;
  check(!request.prompt.empty(), ErrorKind::kInvalidInput, "the prompt is empty (no tokens)");
  check(request.max_tokens >= 0, ErrorKind::kInvalidInput, "max_tokens must be >= 0");
  const int64_t prompt_len = static_cast<int64_t>(request.prompt.size());
  check(prompt_len < options_.context_size, ErrorKind::kInvalidInput,
        "the prompt has {} tokens; the context size is {}", prompt_len, options_.context_size);
  const int64_t V = model_->config().vocab_size;
  for (int32_t id : request.prompt)
    check(id >= 0 && id < V, ErrorKind::kInvalidInput, "prompt token {} is outside the vocabulary (size {})", id, V);

  GenerationResult result;
  Sequence seq(*model_, options_.context_size);
  Sampler sampler(request.sampling);
  std::vector<int32_t> history = request.prompt;
  const std::span<float> logits(logits_.as<float>(), static_cast<size_t>(V));
  // GPU models write logits on the device; only what the sampler needs comes back: the token id
  // for plain greedy decoding, the tokens that can be drawn for temperature sampling of unedited
  // logits, the whole row otherwise.
  const bool on_device = !device_logits_.empty();
  const Tensor& step_logits = on_device ? device_logits_.view() : logits_.view();

  const auto t0 = Clock::now();
  for (int64_t pos = 0; pos < prompt_len; pos += options_.prefill_chunk) {
    const int64_t n = std::min(options_.prefill_chunk, prompt_len - pos);
    seq.forward(*model_, std::span<const int32_t>(request.prompt).subspan(pos, n), step_logits, false);
  }
  backend::synchronize(model_->device());  // GPU work is queued: time it done
  const auto t1 = Clock::now();
  result.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();

  const int64_t budget = std::min(request.max_tokens, options_.context_size - prompt_len);
  result.finish_reason = FinishReason::kLength;
  std::vector<int32_t> feed;  // tokens to run through the model before the next sample
  feed.reserve(16);
  // Emits one token; false when generation must end (cancelled, or the budget is spent).
  auto emit = [&](int32_t token) {
    result.tokens.push_back(token);
    history.push_back(token);
    feed.push_back(token);
    if (on_token && !on_token(token)) {
      result.finish_reason = FinishReason::kCancelled;
      return false;
    }
    return static_cast<int64_t>(result.tokens.size()) < budget;
  };
  check(request.top_logprobs <= 20, ErrorKind::kInvalidInput, "top_logprobs must be at most 20");
  const bool want_logprobs = request.top_logprobs >= 0 && request.on_logprob;
  TokenLogprob logprob;
  // On a GPU the sampler's edits and the pick run where the logits lie, and only the token comes
  // back; logprobs need the whole row on the host.
  const bool run_ahead = options_.run_ahead == EngineOptions::RunAhead::kOn ||
                         (options_.run_ahead == EngineOptions::RunAhead::kAuto && on_device);
  const bool pick_on_device = (on_device || run_ahead) && !want_logprobs;
  // A pick on the device is queued into slot s and read back by await_pick(s).
  auto queue_pick = [&](int s) {
    if (sampler.edits_logits()) edit_on_device(sampler, history, step_logits);
    const Tensor& token = device_tokens_[s].view();
    if (request.sampling.temperature > 0.0f) {
      backend::sample_row(step_logits, sampler.device_draw(), token);
    } else {
      backend::argmax(step_logits.reshaped({1, V}), token);
    }
    readbacks_[s].start(token);
  };
  auto await_pick = [&](int s) {
    int32_t id = 0;
    std::memcpy(&id, readbacks_[s].wait(), sizeof(id));
    check(id >= 0, ErrorKind::kInvalidInput, "every token was masked out");  // as the host sampler
    return id;
  };
  auto host_pick = [&]() {
    if (on_device) backend::copy(device_logits_.view(), logits_.view());
    if (want_logprobs) log_softmax(logits);  // before the sampler edits the logits
    return sampler.sample(logits, history);
  };
  // Running ahead: the step of a picked token is queued before the host has read the token (the
  // GPU reads it where the pick put it), so the GPU never waits for the host between steps. It
  // needs picks that do not depend on the history the host keeps (no penalties or logit bias),
  // and, when a controller may replace a token, a model whose state can drop the step again
  // (truncate). A step run ahead is dropped as if it had never run whenever the host does not
  // emit exactly the picked token next (a stop, or a controller's edit), so the tokens are those
  // of the plain loop.
  const bool may_run_ahead = pick_on_device && run_ahead && !sampler.edits_logits() &&
                             (request.controller == nullptr || seq.truncatable());
  int slot = 0;
  std::mt19937_64 random_before;  // the sampler's stream before a pick run ahead, for a controller's edit
  if (pick_on_device) queue_pick(slot);
  while (static_cast<int64_t>(result.tokens.size()) < budget) {
    // Not for the budget's last token: its step would never be used.
    bool ahead = may_run_ahead && static_cast<int64_t>(result.tokens.size()) + 1 < budget;
    if (ahead) {
      seq.forward_pending(*model_, device_tokens_[slot].view(), step_logits);
      if (request.controller) random_before = sampler.random_state();
      queue_pick(1 - slot);
    }
    const int32_t token = pick_on_device ? await_pick(slot) : host_pick();
    if (ahead) seq.resolve_pending(token);
    ControlDecision decision;
    if (std::find(request.stop_ids.begin(), request.stop_ids.end(), token) != request.stop_ids.end()) {
      std::optional<ControlDecision> instead;
      if (request.controller) instead = request.controller->on_end(token);
      if (!instead) {
        result.finish_reason = FinishReason::kStop;
        break;
      }
      check(!instead->keep, ErrorKind::kInternal,
            "a token controller kept an end-of-generation token");
      decision = std::move(*instead);
    } else if (request.controller) {
      decision = request.controller->on_sampled(token);
    }
    check(decision.keep || !decision.inject.empty() || decision.stop, ErrorKind::kInternal,
          "a token controller dropped a token without replacing it");
    if (ahead && !(decision.keep && decision.inject.empty() && !decision.stop)) {
      // The step run ahead fed a token the plain loop would not feed alone: undo it and its pick.
      seq.truncate(seq.n_tokens() - 1);
      sampler.restore_random_state(random_before);
      ahead = false;
    }
    feed.clear();
    bool more = !decision.stop;
    if (decision.keep && want_logprobs) {
      fill_logprob(token, request.top_logprobs, logprob);
      request.on_logprob(logprob);
    }
    if (decision.keep) more = emit(token) && more;
    for (int32_t t : decision.inject) {
      check(t >= 0 && t < V, ErrorKind::kInternal, "injected token {} is outside the vocabulary", t);
      if (result.finish_reason == FinishReason::kCancelled || static_cast<int64_t>(result.tokens.size()) >= budget)
        break;
      request.controller->on_injected(t);
      ++result.injected_tokens;
      more = emit(t) && more;
    }
    if (result.finish_reason == FinishReason::kCancelled) break;
    if (decision.stop) {
      result.finish_reason = decision.reason;
      break;
    }
    if (!more) break;  // budget spent: no need to run the model for a token we will not sample
    if (ahead) {  // the token's step is already queued, and the next pick behind it
      slot = 1 - slot;
      continue;
    }
    seq.forward(*model_, feed, step_logits, false);
    if (pick_on_device) queue_pick(slot);
  }
  result.decode_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return result;
}

void Engine::edit_on_device(Sampler& sampler, std::span<const int32_t> history, const Tensor& logits) {
  sampler.logit_edits(history, static_cast<size_t>(model_->config().vocab_size), edits_);
  const auto n = static_cast<int64_t>(edits_.ids.size());
  if (n == 0) return;
  // One upload: ids, counts and the biases' bits, each a run of n words.
  edit_words_.resize(static_cast<size_t>(3 * n));
  std::copy(edits_.ids.begin(), edits_.ids.end(), edit_words_.begin());
  std::copy(edits_.counts.begin(), edits_.counts.end(), edit_words_.begin() + n);
  std::memcpy(edit_words_.data() + 2 * n, edits_.biases.data(), static_cast<size_t>(n) * sizeof(float));
  if (edit_buffer_.empty() || edit_buffer_.numel() < 3 * n)
    edit_buffer_ = backend::Buffer(model_->device(), DType::kI32, {std::max<int64_t>(3 * n, 3 * 1024)});
  const Tensor words = edit_buffer_.view().rows(0, 3 * n);
  backend::copy_from_host(edit_words_.data(), words);
  Tensor biases = words.rows(2 * n, 3 * n);
  biases.dtype = DType::kF32;
  backend::edit_logits(logits, words.rows(0, n), words.rows(n, 2 * n), biases, sampler.penalties());
}

void Engine::log_softmax(std::span<const float> logits) {
  logprobs_.resize(logits.size());
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - mx));
  const float log_sum = mx + static_cast<float>(std::log(sum));
  for (size_t i = 0; i < logits.size(); ++i) logprobs_[i] = logits[i] - log_sum;
}

void Engine::fill_logprob(int32_t token, int top, TokenLogprob& out) const {
  out.token = token;
  out.logprob = logprobs_[static_cast<size_t>(token)];
  out.top.clear();
  if (top <= 0) return;
  // The `top` largest by a bounded selection (V is large, top ≤ 20).
  for (size_t i = 0; i < logprobs_.size(); ++i) {
    const float v = logprobs_[i];
    if (static_cast<int>(out.top.size()) == top && v <= out.top.back().second) continue;
    auto pos = std::upper_bound(out.top.begin(), out.top.end(), v,
                                [](float x, const std::pair<int32_t, float>& e) { return x > e.second; });
    out.top.insert(pos, {static_cast<int32_t>(i), v});
    if (static_cast<int>(out.top.size()) > top) out.top.pop_back();
  }
}

}  // namespace strata::runtime
