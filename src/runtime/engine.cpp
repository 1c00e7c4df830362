// Engine implementation. A step has three phases, so that a GPU never waits for the host between
// steps while every request is handled exactly as it would be alone:
//   1. run ahead: for each request whose last pick is still on its way back and whose next step
//      cannot depend on the host's reading of it, queue that step (the model reads the id where
//      the pick wrote it) and the pick behind it;
//   2. read the picks and handle each token on the host (stop ids, controller, callback);
//   3. queue the steps of the requests that did not run ahead (their emitted tokens, and prompt
//      chunks within the step's budget), each followed by its pick.
// Each request runs its own forward() on its own slot, so its arithmetic never depends on what
// else is in the step.
#include "runtime/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "backend/ops.h"
#include "core/error.h"
#include "core/log.h"
#include "runtime/sequence.h"

namespace strata::runtime {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
  }
  return "stop";
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

void Work::on_failure(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    on_error(e.what());
  } catch (...) {
    on_error("unknown error");
  }
}

struct Engine::SlotTools {
  SlotTools(Device device, int64_t vocab)
      : readbacks{backend::Readback(device), backend::Readback(device)} {
    logits = backend::Buffer(device, DType::kF32, {vocab});
    for (backend::Buffer& t : tokens) t = backend::Buffer(device, DType::kI32, {1});
  }
  backend::Buffer logits;  // the slot's last logits, where the model computes them
  // The tokens picked on the device (I32 [1] each, greedy or sampled) and their way back to the
  // host: two, so that one step's pick can be queued while the host reads the one before.
  backend::Buffer tokens[2];
  backend::Readback readbacks[2];
  bool in_flight[2] = {false, false};  // a readback started and not yet waited for
  // Waits for pick s's readback, if one is in flight, and forgets it (a pick no token will use).
  void drop_pick(int s) {
    if (!in_flight[s]) return;
    in_flight[s] = false;
    (void)readbacks[s].wait();
  }
  // The sampler's logit edits (penalties, logit bias) applied to the logits where they lie.
  Sampler::LogitEdits edits;
  std::vector<int32_t> edit_words;  // the edits as uploaded: ids, counts, the biases' bits
  backend::Buffer edit_buffer;      // their device copy (grows, never shrinks)
  // A constrained request's token mask and its device copy (allocated on first use).
  std::vector<uint32_t> mask_words;
  backend::Buffer mask_buffer;
  // Speculation (allocated when the slot's first speculating request starts): the verify step's
  // per-position recurrent state, every row's logits, the rows' greedy picks.
  std::unique_ptr<VerifySlots> verify_slots;
  backend::Buffer verify_logits;  // [rows, vocab]
  backend::Buffer verify_picks;   // I32 [rows]
  std::vector<int32_t> verify_host_picks;
  std::vector<float> verify_host_logits;  // [rows, vocab]: a GPU's rows, for picks on the host
};

struct Engine::Active {
  std::shared_ptr<Work> work;
  int slot = -1;
  Sequence* seq = nullptr;
  SlotTools* tools = nullptr;
  std::optional<Sampler> sampler;
  std::vector<int32_t> history;  // the prompt and the emitted tokens (penalties read it)
  GenerationResult result;
  int64_t budget = 0;     // tokens it may emit
  int64_t prefilled = 0;  // prompt tokens run
  bool want_logprobs = false;
  bool pick_on_device = false;  // picks run where the logits lie and only the id comes back
  bool may_run_ahead = false;
  bool pick_pending = false;  // a step's logits wait for their pick (on the device: queued)
  int pick_slot = 0;          // the tools' token and readback the pending pick uses
  bool ahead = false;         // the pending pick's own step is queued (phase 1)
  bool done = false;
  bool swapped = false;  // preempted: its KV rows wait in host memory (StatePool::swap_out)
  std::vector<int32_t> feed;      // tokens to run through the model before the next pick
  std::mt19937_64 random_before;  // the sampler's stream before a pick run ahead or a verify's draws
  std::vector<float> logprobs;    // log-softmax of the last host logits (when asked for)
  TokenLogprob logprob;
  Clock::time_point started, decode_started;
  bool decoding = false;  // the first pick has been read

  // Speculation: its drafter (its own, or the request's), drafts per verify step (0: none), and the
  // tokens of the verify step whose picks are pending (empty: a plain pick is).
  std::unique_ptr<Drafter> own_drafter;
  Drafter* drafter = nullptr;
  int64_t draft_max = 0;
  std::optional<DraftLength> length;  // adaptive: how many of them the next verify step takes
  // Drafts made while it decodes plainly, for the history's first `shadow_at` tokens, checked
  // against the tokens that follow (evidence for `length` without a verify step).
  std::vector<int32_t> shadow;
  size_t shadow_at = 0;
  double propose_seconds = 0.0;  // the drafter's time per proposal (a running average)
  int64_t since_shadow = 0;      // plain steps since the last shadow drafts
  bool may_run_ahead_plain = false;   // may_run_ahead, for its plain steps
  bool verify_on_device = false;  // its verify rows' picks run where the logits lie
  std::vector<int32_t> drafts, verify;

  Cuts cuts;  // where its prefill cuts its prompt
  size_t next_cut = 0;  // the first cut past `prefilled`

  const GenerationRequest& request() const { return work->request; }
  int64_t prompt_len() const { return static_cast<int64_t>(request().prompt.size()); }
  // The tokens of its next prefill chunk: to the next cut, or to the prompt's end.
  int64_t next_chunk() {
    while (next_cut < cuts.at.size() && cuts.at[next_cut] <= prefilled) ++next_cut;
    return (next_cut < cuts.at.size() ? cuts.at[next_cut] : prompt_len()) - prefilled;
  }
};

namespace {

void log_softmax(std::span<const float> logits, std::vector<float>& out) {
  out.resize(logits.size());
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - mx));
  const float log_sum = mx + static_cast<float>(std::log(sum));
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - log_sum;
}

void fill_logprob(std::span<const float> logprobs, int32_t token, int top, TokenLogprob& out) {
  out.token = token;
  out.logprob = logprobs[static_cast<size_t>(token)];
  out.top.clear();
  if (top <= 0) return;
  // The `top` largest by a bounded selection (V is large, top ≤ 20).
  for (size_t i = 0; i < logprobs.size(); ++i) {
    const float v = logprobs[i];
    if (static_cast<int>(out.top.size()) == top && v <= out.top.back().second) continue;
    auto pos =
        std::upper_bound(out.top.begin(), out.top.end(), v,
                         [](float x, const std::pair<int32_t, float>& e) { return x > e.second; });
    out.top.insert(pos, {static_cast<int32_t>(i), v});
    if (static_cast<int>(out.top.size()) > top) out.top.pop_back();
  }
}

// generate()'s request: records what the engine reports, and keeps the error to rethrow it.
class SoloWork final : public Work {
 public:
  explicit SoloWork(const TokenCallback& on_token) : on_token_(on_token) {}
  bool on_token(int32_t id) override { return !on_token_ || on_token_(id); }
  void on_finish(const GenerationResult& result) override { result_ = result; }
  void on_error(const std::string& message) override {
    error_ = std::make_exception_ptr(Error(ErrorKind::kInternal, message));
  }
  void on_failure(std::exception_ptr error) override { error_ = std::move(error); }

  GenerationResult take() {
    if (error_) std::rethrow_exception(error_);
    return std::move(result_);
  }

 private:
  const TokenCallback& on_token_;
  GenerationResult result_;
  std::exception_ptr error_;
};

}  // namespace

Engine::Engine(std::unique_ptr<model::Model> model, EngineOptions options)
    : model_(std::move(model)),
      options_(options),
      pool_(*model_, options_.parallel, options_.context_size, options_.kv_blocks,
            options_.kv_block_tokens),
      cache_(*model_, pool_,
             PrefixCacheOptions{options_.prefix_cache, options_.prefill_chunk, options_.prefix_cache_host_bytes,
                                options_.state_dir, options_.prefix_cache_disk_bytes,
                                options_.prefix_cache_compress, options_.prefix_cache_lock_host}),
      logits_(DType::kF32, {model_->config().vocab_size}) {
  check(options_.prefill_chunk > 0, ErrorKind::kInvalidInput, "the prefill chunk must be positive");
  check(options_.step_tokens >= 0, ErrorKind::kInvalidInput,
        "the step token budget must not be negative");
  check(options_.speculative.method != SpeculativeParams::Method::kDraft || options_.draft_model,
        ErrorKind::kInvalidInput, "speculative decoding with a draft model needs a draft model (--draft-model)");
  check(!options_.draft_model || options_.draft_model->config().vocab_size == model_->config().vocab_size,
        ErrorKind::kInvalidInput, "the draft model's vocabulary has {} tokens, the model's {}",
        options_.draft_model ? options_.draft_model->config().vocab_size : 0, model_->config().vocab_size);
  check(!options_.draft_model || options_.draft_model->device() == model_->device(), ErrorKind::kInvalidInput,
        "the draft model runs on another device than the model");
  if (options_.speculative.method == SpeculativeParams::Method::kSelf ||
      options_.self_draft_layers != 0)
    (void)self_draft_layers(0);  // refused now rather than by every request
  if (options_.step_tokens == 0) options_.step_tokens = 16 * options_.prefill_chunk;
  for (int64_t i = 0; i < pool_.slots(); ++i)
    tools_.push_back(std::make_unique<SlotTools>(model_->device(), model_->config().vocab_size));
  stats_.slots = pool_.slots();
  const auto slots = static_cast<size_t>(pool_.slots());
  batch_.reserve(slots);
  entries_.reserve(slots);
  items_.reserve(slots);
  publish();
}

Engine::~Engine() {
  try {
    backend::synchronize(model_->device());  // no copy may land in freed page-locked memory
  } catch (const std::exception& e) {
    log::error("engine shutdown: {}", e.what());
  }
}

void Engine::validate(const GenerationRequest& request) const {
  check(!request.prompt.empty(), ErrorKind::kInvalidInput, "the prompt is empty (no tokens)");
  check(request.max_tokens >= 0, ErrorKind::kInvalidInput, "max_tokens must be >= 0");
  const int64_t prompt_len = static_cast<int64_t>(request.prompt.size());
  check(prompt_len < options_.context_size, ErrorKind::kInvalidInput,
        "the prompt has {} tokens; the context size is {}", prompt_len, options_.context_size);
  const int64_t V = model_->config().vocab_size;
  for (int32_t id : request.prompt)
    check(id >= 0 && id < V, ErrorKind::kInvalidInput,
          "prompt token {} is outside the vocabulary (size {})", id, V);
  check(request.top_logprobs <= 20, ErrorKind::kInvalidInput, "top_logprobs must be at most 20");
  check(request.speculative.method != SpeculativeParams::Method::kDraft || options_.draft_model,
        ErrorKind::kInvalidInput, "speculative decoding with a draft model: none is loaded (--draft-model)");
  using Method = SpeculativeParams::Method;
  const Method method = request.speculative.method == Method::kDefault ? options_.speculative.method
                                                                       : request.speculative.method;
  if (method == Method::kSelf) (void)self_draft_layers(request.speculative.layers);
  check_sampling(request.sampling);
}

int64_t Engine::self_draft_layers(int64_t layers) const {
  const int64_t n = model_->config().num_layers;
  if (layers == 0) layers = options_.self_draft_layers;
  if (layers == 0) layers = std::max<int64_t>(1, n / 4);
  check(layers >= 1 && layers < n, ErrorKind::kInvalidInput,
        "self-speculation drafts with the model's first {} layers; it has {} (at least 1 and "
        "fewer than all)",
        layers, n);
  return layers;
}

model::Model& Engine::self_draft(int64_t layers) {
  std::unique_ptr<model::Model>& view = self_drafts_[layers];
  if (!view) view = model_->first_layers(layers);
  return *view;
}

GenerationResult Engine::generate(const GenerationRequest& request, const TokenCallback& on_token) {
  check(idle(), ErrorKind::kInternal, "generate() needs an idle engine");
  validate(request);
  auto work = std::make_shared<SoloWork>(on_token);
  work->request = request;
  add(work);
  while (!idle()) step();
  return work->take();
}

void Engine::add(std::shared_ptr<Work> work) {
  waiting_.push_back(std::move(work));
  publish();
}

bool Engine::idle() const { return running_.empty() && waiting_.empty(); }

void Engine::cancel_all() {
  for (auto& a : running_) a->work->cancel();
  for (auto& w : waiting_) w->cancel();
}

EngineStats Engine::stats() const {
  std::lock_guard lock(stats_mutex_);
  return published_;
}

void Engine::publish() {
  stats_.running =
      std::count_if(running_.begin(), running_.end(), [](const auto& a) { return !a->done; });
  stats_.waiting = static_cast<int64_t>(waiting_.size());
  stats_.slots_free = pool_.free_slots();
  stats_.kv_blocks = pool_.kv_blocks();
  stats_.kv_blocks_free = pool_.free_kv_blocks();
  stats_.swapped = swapped_now();
  stats_.prefix = cache_.stats();
  std::lock_guard lock(stats_mutex_);
  published_ = stats_;
}

void Engine::admit() {
  while (!waiting_.empty()) {
    std::shared_ptr<Work> work = waiting_.front();
    if (work->cancelled()) {  // never started: nothing to undo
      waiting_.pop_front();
      GenerationResult result;
      result.finish_reason = FinishReason::kCancelled;
      ++stats_.cancelled;
      publish();
      work->on_release();
      work->on_finish(result);
      continue;
    }
    try {
      validate(work->request);
    } catch (...) {
      waiting_.pop_front();
      ++stats_.failed;
      publish();
      work->on_release();
      work->on_failure(std::current_exception());
      continue;
    }
    if (stats_.swapped > 0) break;  // preempted requests get blocks first
    const int slot = pool_.acquire();
    if (slot < 0) break;  // arrival order: the first waiting request runs first
    waiting_.pop_front();
    int64_t cached = 0;
    CacheTier tier = CacheTier::kNone;
    Cuts plan;
    try {
      plan = cuts(work->request);
      if (work->request.prefix_cache) cached = cache_.resume(slot, work->request.prompt, plan.at, plan.keys, &tier);
    } catch (...) {
      pool_.release(slot);
      ++stats_.failed;
      publish();
      work->on_release();
      work->on_failure(std::current_exception());
      continue;
    }
    if (cached < 0) {  // its prefix is being read from disk: it goes first once it is here
      pool_.release(slot);
      waiting_.push_front(std::move(work));
      waiting_for_disk_ = true;
      break;
    }
    // It starts once it holds the blocks of its first chunk after the cached prefix; other cached
    // prefixes give theirs up first (not the one it resumes from: the slot keeps those blocks too).
    // Otherwise it waits, first in line.
    const auto next_cut = std::upper_bound(plan.at.begin(), plan.at.end(), cached);
    const int64_t first_end = next_cut != plan.at.end() ? *next_cut : static_cast<int64_t>(work->request.prompt.size());
    bool held = pool_.reserve(slot, first_end);
    while (!held && cache_.evict()) held = pool_.reserve(slot, first_end);
    if (!held) {
      pool_.release(slot);
      waiting_.push_front(std::move(work));
      break;
    }
    if (cache_.enabled() && work->request.prefix_cache && !work->request.background) {  // (clients' lookups)
      ++(cached > 0 ? stats_.prefix_hits : stats_.prefix_misses);
      stats_.cached_tokens += static_cast<uint64_t>(cached);
      cache_.count_hit(tier);
    }
    start(std::move(work), slot, cached, tier, std::move(plan));
  }
}

Engine::Cuts Engine::cuts(const GenerationRequest& request) const {
  Cuts c;
  const auto n = static_cast<int64_t>(request.prompt.size());
  std::vector<int64_t> marks = request.boundaries;
  std::sort(marks.begin(), marks.end());
  auto mark = marks.begin();
  for (int64_t at = 0;;) {
    while (mark != marks.end() && *mark <= at) ++mark;
    const int64_t next = mark != marks.end() ? std::min(at + options_.prefill_chunk, *mark) : at + options_.prefill_chunk;
    if (next >= n) break;
    c.at.push_back(next);
    at = next;
  }
  if (cache_.enabled() && request.prefix_cache) c.keys = cache_.keys(request.prompt, c.at);
  return c;
}

void Engine::start(std::shared_ptr<Work> work, int slot, int64_t cached, CacheTier tier, Cuts cuts) {
  auto a = std::make_unique<Active>();
  a->work = std::move(work);
  a->slot = slot;
  a->prefilled = cached;
  a->result.cached_tokens = cached;
  a->result.cached_tier = tier;
  a->cuts = std::move(cuts);
  a->seq = &pool_.sequence(slot);
  a->tools = tools_[static_cast<size_t>(slot)].get();
  a->started = Clock::now();
  Active& r = *a;
  running_.push_back(std::move(a));
  try {
    const GenerationRequest& request = r.request();
    r.sampler.emplace(request.sampling);
    r.history.reserve(request.prompt.size() + static_cast<size_t>(request.max_tokens));
    r.history = request.prompt;
    r.budget = std::min(request.max_tokens, options_.context_size - r.prompt_len());
    r.result.finish_reason = FinishReason::kLength;
    r.feed.reserve(16);
    r.want_logprobs = request.top_logprobs >= 0 && request.on_logprob;
    // On a GPU the sampler's edits and the pick run where the logits lie, and only the token
    // comes back; logprobs need the whole row on the host.
    const bool on_device = model_->device() != Device::kCpu;
    const bool run_ahead = options_.run_ahead == EngineOptions::RunAhead::kOn ||
                           (options_.run_ahead == EngineOptions::RunAhead::kAuto && on_device);
    r.pick_on_device = (on_device || run_ahead) && !r.want_logprobs;
    // Running ahead needs picks that do not depend on the history the host keeps (no penalties
    // or logit bias), and, when a controller may replace a token, a state that can drop the step
    // again (truncate). A step run ahead is dropped as if it had never run whenever the host does
    // not emit exactly the picked token next, so the tokens are those of the plain loop.
    r.may_run_ahead = r.pick_on_device && run_ahead && !r.sampler->edits_logits() &&
                      request.constraint == nullptr &&
                      (request.controller == nullptr || r.seq->truncatable());
    // Speculation picks every verify row as plain decoding picks at its position: greedy, or a
    // draw that takes the next number of the request's random stream, after the edits and mask of
    // that position (the history and the constraint then include the drafts before it, accepted
    // by then). A draft is accepted when the pick equals it. For drafts proposed as single tokens
    // this is speculative rejection sampling (Leviathan et al. 2023) with q the draft's point
    // mass: accepted with probability p(draft), else a draw from p without it; and the draws are
    // those plain decoding makes, so even seeded sampling yields plain decoding's tokens. It does
    // not run ahead: the next step depends on how many drafts the host accepts.
    using Method = SpeculativeParams::Method;
    Method method = request.speculative.method == Method::kDefault ? options_.speculative.method
                                                                   : request.speculative.method;
    if (method == Method::kDefault) method = Method::kOff;
    const int64_t rows = model_->max_verify_tokens();
    if ((method != Method::kOff || request.drafter != nullptr) && rows >= 2) {
      const int64_t asked = request.speculative.draft_max > 0 ? request.speculative.draft_max
                                                              : options_.speculative.draft_max;
      r.draft_max = std::min(asked > 0 ? asked : 4, rows - 1);
      r.drafter = request.drafter;
      if (r.drafter == nullptr) {
        if (method == Method::kDraft) {  // its own state on the draft model, for the whole context
          r.own_drafter = std::make_unique<ModelDrafter>(*options_.draft_model, options_.context_size);
        } else if (method == Method::kSelf) {  // the same on the model's first layers
          const int64_t layers = self_draft_layers(request.speculative.layers);
          r.own_drafter = std::make_unique<ModelDrafter>(self_draft(layers), options_.context_size);
        } else {
          r.own_drafter = std::make_unique<NgramDrafter>();
        }
        r.drafter = r.own_drafter.get();
      }
      r.result.speculative.method = request.drafter != nullptr ? Method::kCustom : method;
      if (request.speculative.adaptive.value_or(options_.speculative_adaptive)) r.length.emplace(r.draft_max);
      r.may_run_ahead_plain = r.may_run_ahead;
      r.may_run_ahead = false;
      // Greedy picks and plain draws run where the logits lie; edits and masks that follow the
      // drafts row by row run on the host.
      r.verify_on_device = r.pick_on_device && !r.sampler->edits_logits() && request.constraint == nullptr;
      r.drafts.reserve(static_cast<size_t>(r.draft_max));
      r.verify.reserve(static_cast<size_t>(r.draft_max + 1));
      SlotTools& t = *r.tools;
      if (!t.verify_slots) {  // once per slot, for the most rows the model verifies
        const int64_t V = model_->config().vocab_size;
        t.verify_slots = std::make_unique<VerifySlots>(*r.seq, rows);
        t.verify_logits = backend::Buffer(model_->device(), DType::kF32, {rows, V});
        t.verify_picks = backend::Buffer(model_->device(), DType::kI32, {rows});
        t.verify_host_picks.resize(static_cast<size_t>(rows));
      }
      if (!r.verify_on_device && on_device && t.verify_host_logits.empty())
        t.verify_host_logits.resize(static_cast<size_t>(rows * model_->config().vocab_size));
    }
  } catch (...) {
    fail(r, std::current_exception());
  }
}

void Engine::step() {
  for (auto& a : running_)
    if (a->work->cancelled()) {
      a->result.finish_reason = FinishReason::kCancelled;
      finish(*a);
    }
  std::erase_if(running_, [](const std::unique_ptr<Active>& a) { return a->done; });
  yield_background();
  if (cache_.poll()) waiting_for_disk_ = false;  // (a read is in: its request may start)
  resume_swapped();
  admit();
  std::erase_if(running_, [](const std::unique_ptr<Active>& a) { return a->done; });
  if (running_.empty() && waiting_for_disk_) {
    cache_.wait_for_disk(std::chrono::milliseconds(50));  // nothing else to run meanwhile
    publish();
  }
  if (running_.empty()) {
    lone_tokens_ = 0;  // (an idle engine's next step is no measure of the last one)
    return;
  }
  ++stats_.steps;
  stats_.step_requests += running_.size();
  const uint64_t tokens_before = stats_.step_tokens;
  step_requests_ = 0;
  step_prefilled_ = false;

  auto guarded = [&](Active& a, auto&& phase) {
    if (a.done) return;
    try {
      phase(a);
    } catch (...) {
      fail(a, std::current_exception());
    }
  };
  run_ahead_all();
  for (auto& a : running_)
    guarded(*a, [&](Active& r) {
      if (!r.pick_pending) return;
      read_pick(r);
      if (r.length && !r.done) settle_shadow(r);
    });
  const Clock::time_point read = Clock::now();
  if (lone_tokens_ > 0) step_costs_.add(lone_tokens_, seconds_between(last_read_, read));
  last_read_ = read;
  // Decodes count against the step's budget; prompts take whole chunks in arrival order, and the
  // first always runs, so every prompt is cut into the same chunks whatever the load.
  int64_t budget = options_.step_tokens;
  feed_all(budget);
  batch_.clear();  // its steps are queued: its requests may give way to older prompts' blocks
  bool first = true;
  for (auto& a : running_)
    guarded(*a, [&](Active& r) {
      if (r.prefilled == r.prompt_len() || r.swapped) return;
      const int64_t n = r.next_chunk();
      if (!first && n > budget) return;
      if (!room(r, n)) return;
      first = false;
      budget -= n;
      step_prefilled_ = true;
      prefill(r);
    });
  std::erase_if(running_, [](const std::unique_ptr<Active>& a) { return a->done; });
  lone_tokens_ = step_requests_ == 1 && !step_prefilled_ ? static_cast<int64_t>(stats_.step_tokens - tokens_before) : 0;
  publish();
}

void Engine::yield_background() {
  const auto foreground = [](const std::shared_ptr<Work>& w) { return !w->request.background; };
  if (std::none_of(waiting_.begin(), waiting_.end(), foreground)) return;
  // Someone waits: background requests end now (what they cached so far stays), and give way.
  for (auto& a : running_)
    if (a->request().background && !a->done) {
      a->result.finish_reason = FinishReason::kCancelled;
      finish(*a);
    }
  std::erase_if(running_, [](const std::unique_ptr<Active>& a) { return a->done; });
  for (auto& w : waiting_)
    if (w->request.background) w->cancel();
}

bool Engine::may_run_ahead_now(const Active& a) const {
  // Not for the budget's last token: its step would never be used.
  return !a.done && !a.swapped && a.pick_pending && (a.may_run_ahead || (a.may_run_ahead_plain && plain_next(a))) &&
         !a.work->cancelled() && static_cast<int64_t>(a.result.tokens.size()) + 1 < a.budget;
}

int64_t Engine::decoding_now() const {
  return std::count_if(running_.begin(), running_.end(), [](const std::unique_ptr<Active>& a) {
    return !a->done && !a->swapped && a->prefilled == a->prompt_len();
  });
}

void Engine::count_propose(Active& a, Clock::time_point since) {
  const double s = seconds_between(since, Clock::now());
  a.propose_seconds = a.propose_seconds == 0.0 ? s : 0.8 * a.propose_seconds + 0.2 * s;
}

void Engine::shadow_propose(Active& a) {
  if (!a.length || !a.shadow.empty() || a.drafter == nullptr) return;
  ++a.since_shadow;
  // Drafting costs at most 3% of the plain steps since the last shadow drafts.
  const double plain = step_costs_.plain_seconds();
  if (plain > 0.0 && a.propose_seconds > 0.03 * plain * static_cast<double>(a.since_shadow)) return;
  const int64_t room_left = a.seq->capacity() - static_cast<int64_t>(a.history.size()) - 1;
  const int64_t most = std::min(a.draft_max, room_left);
  if (most <= 0) return;
  const Clock::time_point proposing = Clock::now();
  a.drafter->propose(a.history, most, a.shadow);
  count_propose(a, proposing);
  if (static_cast<int64_t>(a.shadow.size()) > most) a.shadow.resize(static_cast<size_t>(most));
  a.shadow_at = a.history.size();
  a.since_shadow = 0;
}

void Engine::settle_shadow(Active& a) {
  if (a.shadow.empty() || a.history.size() <= a.shadow_at) return;
  const size_t have = std::min(a.history.size() - a.shadow_at, a.shadow.size());
  size_t same = 0;
  while (same < have && a.history[a.shadow_at + same] == a.shadow[same]) ++same;
  if (same == a.shadow.size() || same < have) {  // all accepted, or one refused
    a.length->verified(static_cast<int64_t>(same), same < have);
    a.shadow.clear();
  }
}

bool Engine::plain_next(const Active& a) const {
  return a.draft_max == 0 || (a.length && a.length->choose(step_costs_, decoding_now() - 1) == 0);
}

void Engine::run_ahead_all() {
  batch_.clear();
  entries_.clear();
  for (auto& a : running_)
    if (may_run_ahead_now(*a) && room(*a, 1)) {
      batch_.push_back(a.get());
      entries_.push_back(
          DecodeEntry{a->seq, 0, a->tools->tokens[a->pick_slot].view(), a->tools->logits.view()});
    }
  if (batch_.empty()) return;
  if (!decode_batch()) return;
  step_requests_ += static_cast<int64_t>(batch_.size());
  for (Active* a : batch_) {
    if (a->request().controller) a->random_before = a->sampler->random_state();
    if (a->length) {
      a->length->plain_step();
      shadow_propose(*a);
    }
  }
  queue_picks(batch_, /*ahead=*/true);
  for (Active* a : batch_) a->ahead = !a->done;
}

void Engine::feed_all(int64_t& budget) {
  batch_.clear();
  entries_.clear();
  const int64_t others = decoding_now() - 1;  // beside a request that speculates
  for (auto& a : running_) {
    Active& r = *a;
    if (r.done || r.swapped || r.prefilled < r.prompt_len() || r.pick_pending) continue;
    if (r.feed.size() == 1 && r.draft_max > 0) {
      bool verified = false;
      try {
        verified = verify(r, budget, others);
      } catch (...) {
        fail(r, std::current_exception());
        continue;
      }
      if (verified) ++step_requests_;
      if (verified || r.done || r.swapped) continue;
      if (r.length) r.length->plain_step();
    }
    if (!room(r, static_cast<int64_t>(r.feed.size()))) continue;
    budget -= static_cast<int64_t>(r.feed.size());
    ++step_requests_;
    if (r.feed.size() == 1) {
      batch_.push_back(&r);
      entries_.push_back(DecodeEntry{r.seq, r.feed.front(), Tensor{}, r.tools->logits.view()});
      continue;
    }
    try {  // a controller's injection: several tokens, a step of their own
      r.seq->forward(*model_, r.feed, r.tools->logits.view(), false);
      stats_.step_tokens += r.feed.size();
      if (r.pick_on_device) queue_pick(r, r.pick_slot);
      r.pick_pending = true;
    } catch (...) {
      fail(r, std::current_exception());
    }
  }
  if (batch_.empty() || !decode_batch()) return;
  queue_picks(batch_, /*ahead=*/false);
  for (Active* a : batch_) a->pick_pending = !a->done;
}

bool Engine::decode_batch() {
  try {
    forward_decode(*model_, entries_, items_);
  } catch (...) {
    const std::exception_ptr error = std::current_exception();
    for (Active* a : batch_) fail(*a, error);
    return false;
  }
  stats_.step_tokens += batch_.size();
  const auto group = static_cast<size_t>(std::max<int64_t>(1, model_->max_decode_batch()));
  stats_.decode_forwards += (batch_.size() + group - 1) / group;
  stats_.decode_tokens += batch_.size();
  return true;
}

void Engine::read_pick(Active& a) {
  if (!a.verify.empty()) return read_verify(a);
  const int32_t token = a.pick_on_device ? await_pick(a, a.pick_slot) : host_pick(a);
  a.pick_pending = false;
  if (!a.decoding) {
    a.decoding = true;
    a.decode_started = Clock::now();
    a.result.prefill_seconds = seconds_between(a.started, a.decode_started);
  }
  if (a.ahead) a.seq->resolve_pending(token);
  std::optional<ControlDecision> decision = decide(a, token);
  if (!decision) return;
  if (a.ahead && !(decision->keep && decision->inject.empty() && !decision->stop)) {
    // The step run ahead fed a token the plain loop would not feed alone: undo it and its pick.
    a.seq->truncate(a.seq->n_tokens() - 1);
    a.sampler->restore_random_state(a.random_before);
    a.tools->drop_pick(1 - a.pick_slot);
    a.ahead = false;
  }
  apply(a, token, *decision);
  if (a.done) return;
  if (a.ahead) {  // the token's step is already queued, and the next pick behind it
    a.pick_slot = 1 - a.pick_slot;
    a.pick_pending = true;
    a.ahead = false;
  }
}

std::optional<ControlDecision> Engine::decide(Active& a, int32_t token) {
  const GenerationRequest& request = a.request();
  ControlDecision decision;
  if (std::find(request.stop_ids.begin(), request.stop_ids.end(), token) !=
      request.stop_ids.end()) {
    std::optional<ControlDecision> instead;
    if (request.controller) instead = request.controller->on_end(token);
    if (!instead) {
      a.result.finish_reason = FinishReason::kStop;
      finish(a);
      return std::nullopt;
    }
    check(!instead->keep, ErrorKind::kInternal,
          "a token controller kept an end-of-generation token");
    decision = std::move(*instead);
  } else if (request.controller) {
    decision = request.controller->on_sampled(token);
  }
  check(decision.keep || !decision.inject.empty() || decision.stop, ErrorKind::kInternal,
        "a token controller dropped a token without replacing it");
  return decision;
}

bool Engine::apply(Active& a, int32_t token, const ControlDecision& decision) {
  const GenerationRequest& request = a.request();
  const int64_t V = model_->config().vocab_size;
  a.feed.clear();
  // Emits one token; false when generation must end (cancelled, or the budget is spent).
  auto emit = [&](int32_t t) {
    if (request.constraint) request.constraint->on_emitted(t);
    a.result.tokens.push_back(t);
    a.history.push_back(t);
    a.feed.push_back(t);
    if (a.work->cancelled() || !a.work->on_token(t)) {
      a.result.finish_reason = FinishReason::kCancelled;
      return false;
    }
    return static_cast<int64_t>(a.result.tokens.size()) < a.budget;
  };
  bool more = !decision.stop;
  if (decision.keep && a.want_logprobs) {
    fill_logprob(a.logprobs, token, request.top_logprobs, a.logprob);
    request.on_logprob(a.logprob);
  }
  if (decision.keep) more = emit(token) && more;
  for (int32_t t : decision.inject) {
    check(t >= 0 && t < V, ErrorKind::kInternal, "injected token {} is outside the vocabulary", t);
    if (a.result.finish_reason == FinishReason::kCancelled ||
        static_cast<int64_t>(a.result.tokens.size()) >= a.budget)
      break;
    request.controller->on_injected(t);
    ++a.result.injected_tokens;
    more = emit(t) && more;
  }
  if (a.result.finish_reason != FinishReason::kCancelled && decision.stop)
    a.result.finish_reason = decision.reason;
  if (a.result.finish_reason == FinishReason::kCancelled || decision.stop || !more) {
    finish(a);  // budget spent: no need to run the model for a token we will not sample
    return false;
  }
  return decision.keep && decision.inject.empty();
}

bool Engine::verify(Active& a, int64_t& budget, int64_t others) {
  // Drafts that fit the request's budget (the verify step's last pick is always one the plain loop
  // makes too) and its context, as many as pay.
  const int64_t left = a.budget - static_cast<int64_t>(a.result.tokens.size()) - 1;
  const int64_t room_left = a.seq->capacity() - a.seq->n_tokens() - 1;
  const int64_t most = std::min({a.length ? a.length->choose(step_costs_, others) : a.draft_max, left, room_left});
  if (most <= 0) {
    shadow_propose(a);
    return false;
  }
  a.shadow.clear();  // a verify step brings its own evidence
  const Clock::time_point proposing = Clock::now();
  a.drafter->propose(a.history, most, a.drafts);
  count_propose(a, proposing);
  if (a.drafts.empty()) return false;
  if (static_cast<int64_t>(a.drafts.size()) > most) a.drafts.resize(static_cast<size_t>(most));
  const int64_t V = model_->config().vocab_size;
  for (int32_t d : a.drafts)
    check(d >= 0 && d < V, ErrorKind::kInternal, "a drafter proposed token {} outside the vocabulary", d);
  a.verify.assign(a.feed.begin(), a.feed.end());
  a.verify.insert(a.verify.end(), a.drafts.begin(), a.drafts.end());
  const auto T = static_cast<int64_t>(a.verify.size());
  if (!room(a, T)) {
    a.verify.clear();
    return false;
  }
  budget -= T;
  SlotTools& t = *a.tools;
  const Tensor logits = t.verify_logits.view().rows(0, T);
  t.verify_slots->forward(*model_, *a.seq, a.verify, logits);
  if (a.verify_on_device) {
    if (a.request().sampling.temperature > 0.0f) {
      // Each row takes the stream's next number; read_verify takes back those of unused rows.
      a.random_before = a.sampler->random_state();
      for (int64_t i = 0; i < T; ++i)
        backend::sample_row(logits.rows(i, i + 1).reshaped({V}), a.sampler->device_draw(),
                            t.verify_picks.view().rows(i, i + 1));
    } else {
      backend::argmax(logits, t.verify_picks.view().rows(0, T));
    }
  }
  stats_.step_tokens += static_cast<uint64_t>(T);
  ++stats_.verify_steps;
  stats_.drafted_tokens += static_cast<uint64_t>(T - 1);
  ++a.result.speculative.steps;
  a.result.speculative.drafted += T - 1;
  a.pick_pending = true;
  return true;
}

void Engine::read_verify(Active& a) {
  SlotTools& t = *a.tools;
  const auto T = static_cast<int64_t>(a.verify.size());
  const auto V = static_cast<size_t>(model_->config().vocab_size);
  a.pick_pending = false;
  float* host_rows = nullptr;  // [T, V]: the rows on the host, where the host picks
  if (a.verify_on_device) {
    backend::copy_to_host(t.verify_picks.view().rows(0, T), t.verify_host_picks.data());
  } else if (model_->device() == Device::kCpu) {
    host_rows = t.verify_logits.as<float>();
  } else {
    backend::copy_to_host(t.verify_logits.view().rows(0, T), t.verify_host_logits.data());
    host_rows = t.verify_host_logits.data();
  }
  // Row i's pick is the token plain decoding picks after the verified tokens before it; it is
  // handled exactly as that step's pick would be, and the rows after it count only while it is
  // the draft the next row was fed and the request goes on with it unchanged.
  int64_t used = 0;
  int64_t accepted = 0;   // drafts picked
  bool refused = false;  // a draft the model did not pick
  for (int64_t i = 0; i < T; ++i) {
    int32_t token = 0;
    if (a.verify_on_device) {
      token = t.verify_host_picks[static_cast<size_t>(i)];
      check(token >= 0, ErrorKind::kInvalidInput, "every token was masked out");  // as await_pick
    } else {  // as host_pick: the row's logprobs, its mask, the sampler's pick
      std::span<float> row(host_rows + static_cast<size_t>(i) * V, V);
      if (a.want_logprobs) log_softmax(row, a.logprobs);
      mask_on_host(a, row);
      token = a.sampler->sample(row, a.history);
    }
    used = i + 1;
    std::optional<ControlDecision> decision = decide(a, token);
    if (!decision) break;
    const bool plain = apply(a, token, *decision);
    if (!plain || i + 1 == T) break;
    if (token != a.verify[static_cast<size_t>(i + 1)]) {
      refused = true;
      break;
    }
    ++accepted;
    ++a.result.speculative.accepted;
    ++stats_.accepted_tokens;
  }
  if (a.length) a.length->verified(accepted, refused);
  a.verify.clear();
  if (a.verify_on_device && a.request().sampling.temperature > 0.0f) {
    // The stream as plain decoding leaves it: one number for each row whose pick was used.
    a.sampler->restore_random_state(a.random_before);
    for (int64_t i = 0; i < used; ++i) (void)a.sampler->device_draw();
  }
  if (a.done) return;  // its slot is free already
  // The state keeps the tokens whose picks were used: the fed token and the accepted drafts.
  t.verify_slots->keep(*a.seq, used);
}

void Engine::prefill(Active& a) {
  const int64_t n = a.next_chunk();
  a.seq->forward(
      *model_,
      std::span<const int32_t>(a.request().prompt).subspan(static_cast<size_t>(a.prefilled), n),
      a.tools->logits.view(), false);
  stats_.step_tokens += static_cast<uint64_t>(n);
  a.prefilled += n;
  if (a.prefilled < a.prompt_len()) {
    try {
      // A cut short of the end; the last one is the longest prefix a later prompt may share, and
      // is kept on disk too.
      if (!a.cuts.keys.empty())
        cache_.record(a.slot, a.cuts.keys[a.next_cut], a.next_cut + 1 == a.cuts.at.size());
    } catch (const std::exception& e) {  // the request goes on; its prefix is just not kept
      log::error("prefix cache: {}", e.what());
    }
    return;
  }
  if (a.budget == 0) {
    finish(a);
    return;
  }
  if (a.pick_on_device) queue_pick(a, a.pick_slot);
  a.pick_pending = true;
}

bool Engine::room(Active& a, int64_t tokens) {
  try {
    const int64_t need = a.seq->n_tokens() + tokens;
    while (!pool_.reserve(a.slot, need)) {
      if (cache_.evict()) continue;  // cached prefixes give way before any request
      // The newest running request after a that holds blocks and is not in this step's batch
      // gives way.
      Active* victim = nullptr;
      for (auto it = running_.rbegin(); it != running_.rend() && it->get() != &a; ++it) {
        Active& r = **it;
        if (!r.done && !r.swapped && !r.seq->state().blocks.empty() &&
            std::find(batch_.begin(), batch_.end(), &r) == batch_.end()) {
          victim = &r;
          break;
        }
      }
      if (victim == nullptr) {
        preempt(a);  // none is newer: a waits for blocks itself
        return false;
      }
      try {
        preempt(*victim);
      } catch (...) {
        fail(*victim, std::current_exception());  // its blocks come back all the same
      }
    }
    return true;
  } catch (...) {
    fail(a, std::current_exception());
    return false;
  }
}

void Engine::preempt(Active& a) {
  pool_.swap_out(a.slot);
  a.swapped = true;
  ++stats_.preemptions;
  stats_.swapped = swapped_now();
}

int64_t Engine::swapped_now() const {
  return std::count_if(running_.begin(), running_.end(), [](const auto& a) { return a->swapped && !a->done; });
}

void Engine::resume_swapped() {
  for (auto& a : running_) {
    if (!a->swapped || a->done) continue;
    try {
      bool in = pool_.swap_in(a->slot);
      while (!in && cache_.evict()) in = pool_.swap_in(a->slot);  // cached prefixes give way first
      if (!in) break;  // the oldest first
    } catch (...) {
      fail(*a, std::current_exception());
      continue;
    }
    a->swapped = false;
    ++stats_.resumptions;
  }
  stats_.swapped = swapped_now();
}

void Engine::queue_pick(Active& a, int s) {
  SlotTools& t = *a.tools;
  const Tensor& logits = t.logits.view();
  if (a.request().constraint) mask_on_device(a, logits);
  if (a.sampler->edits_logits()) edit_on_device(a, logits);
  const Tensor& token = t.tokens[s].view();
  if (a.request().sampling.temperature > 0.0f) {
    backend::sample_row(logits, a.sampler->device_draw(), token);
  } else {
    backend::argmax(logits.reshaped({1, model_->config().vocab_size}), token);
  }
  t.readbacks[s].start(token);
  t.in_flight[s] = true;
}

void Engine::queue_picks(std::span<Active* const> batch, bool ahead) {
  greedy_.clear(), greedy_logits_.clear(), greedy_tokens_.clear();
  for (Active* a : batch) {
    if (!a->pick_on_device) continue;
    const int s = ahead ? 1 - a->pick_slot : a->pick_slot;
    if (a->request().sampling.temperature > 0.0f || a->request().constraint || a->sampler->edits_logits()) {
      try {
        queue_pick(*a, s);
      } catch (...) {
        fail(*a, std::current_exception());
      }
      continue;
    }
    greedy_.push_back(a);
    greedy_logits_.push_back(a->tools->logits.view());
    greedy_tokens_.push_back(a->tools->tokens[s].view());
  }
  if (greedy_.empty()) return;
  try {
    if (greedy_.size() == 1) {  // one sequence: the one-row launch, as a pick alone
      backend::argmax(greedy_logits_[0].reshaped({1, greedy_logits_[0].numel()}), greedy_tokens_[0]);
    } else {
      backend::argmax_rows(greedy_logits_, greedy_tokens_);
    }
  } catch (...) {
    for (Active* a : greedy_) fail(*a, std::current_exception());
    return;
  }
  for (Active* a : greedy_) {
    const int s = ahead ? 1 - a->pick_slot : a->pick_slot;
    try {
      a->tools->readbacks[s].start(a->tools->tokens[s].view());
      a->tools->in_flight[s] = true;
    } catch (...) {
      fail(*a, std::current_exception());
    }
  }
}

int32_t Engine::await_pick(Active& a, int s) {
  int32_t id = 0;
  std::memcpy(&id, a.tools->readbacks[s].wait(), sizeof(id));
  a.tools->in_flight[s] = false;
  check(id >= 0, ErrorKind::kInvalidInput, "every token was masked out");  // as the host sampler
  return id;
}

int32_t Engine::host_pick(Active& a) {
  const size_t V = static_cast<size_t>(model_->config().vocab_size);
  std::span<float> logits(logits_.as<float>(), V);
  if (model_->device() == Device::kCpu) {
    logits = std::span<float>(a.tools->logits.as<float>(), V);
  } else {
    backend::copy(a.tools->logits.view(), logits_.view());
  }
  if (a.want_logprobs) log_softmax(logits, a.logprobs);  // before the sampler edits the logits
  mask_on_host(a, logits);
  return a.sampler->sample(logits, a.history);
}

void Engine::mask_on_host(Active& a, std::span<float> logits) {
  OutputConstraint* c = a.request().constraint;
  if (c == nullptr) return;
  std::vector<uint32_t>& words = a.tools->mask_words;
  words.resize((logits.size() + 31) / 32);
  if (c->allowed(words))
    for (size_t i = 0; i < logits.size(); ++i)
      if (!((words[i >> 5] >> (i & 31)) & 1u)) logits[i] = -std::numeric_limits<float>::infinity();
}

void Engine::mask_on_device(Active& a, const Tensor& logits) {
  SlotTools& t = *a.tools;
  const int64_t words = (model_->config().vocab_size + 31) / 32;
  t.mask_words.resize(static_cast<size_t>(words));
  if (!a.request().constraint->allowed(t.mask_words)) return;
  if (t.mask_buffer.empty()) t.mask_buffer = backend::Buffer(model_->device(), DType::kI32, {words});
  backend::copy_from_host(t.mask_words.data(), t.mask_buffer.view());
  backend::mask_logits(logits, t.mask_buffer.view());
}

void Engine::edit_on_device(Active& a, const Tensor& logits) {
  SlotTools& t = *a.tools;
  a.sampler->logit_edits(a.history, static_cast<size_t>(model_->config().vocab_size), t.edits);
  const auto n = static_cast<int64_t>(t.edits.ids.size());
  if (n == 0) return;
  // One upload: ids, counts and the biases' bits, each a run of n words.
  t.edit_words.resize(static_cast<size_t>(3 * n));
  std::copy(t.edits.ids.begin(), t.edits.ids.end(), t.edit_words.begin());
  std::copy(t.edits.counts.begin(), t.edits.counts.end(), t.edit_words.begin() + n);
  std::memcpy(t.edit_words.data() + 2 * n, t.edits.biases.data(),
              static_cast<size_t>(n) * sizeof(float));
  if (t.edit_buffer.empty() || t.edit_buffer.numel() < 3 * n)
    t.edit_buffer =
        backend::Buffer(model_->device(), DType::kI32, {std::max<int64_t>(3 * n, 3 * 1024)});
  const Tensor words = t.edit_buffer.view().rows(0, 3 * n);
  backend::copy_from_host(t.edit_words.data(), words);
  Tensor biases = words.rows(2 * n, 3 * n);
  biases.dtype = DType::kF32;
  backend::edit_logits(logits, words.rows(0, n), words.rows(n, 2 * n), biases,
                       a.sampler->penalties());
}

void Engine::finish(Active& a) {
  if (a.done) return;
  a.done = true;
  for (int s = 0; s < 2; ++s) a.tools->drop_pick(s);  // a pick run ahead that no token will use
  const Clock::time_point now = Clock::now();
  if (a.decoding) {
    a.result.decode_seconds = seconds_between(a.decode_started, now);
  } else if (a.result.finish_reason != FinishReason::kCancelled) {
    backend::synchronize(model_->device());  // the prompt's work is queued: time it done
    a.result.prefill_seconds = seconds_between(a.started, Clock::now());
  }
  pool_.release(a.slot);
  if (a.result.finish_reason == FinishReason::kCancelled && a.work->cancelled())
    ++stats_.cancelled;
  else
    ++stats_.finished;
  if (!a.result.tokens.empty() || a.result.prefill_seconds > 0)
    stats_.prompt_tokens += a.request().prompt.size();
  stats_.generated_tokens += a.result.tokens.size();
  stats_.prefill_seconds += a.result.prefill_seconds;
  stats_.decode_seconds += a.result.decode_seconds;
  publish();  // before the callbacks: whoever hears of the end sees it counted
  try {
    a.work->on_release();
    a.work->on_finish(a.result);
  } catch (const std::exception& e) {
    log::error("a request's completion failed: {}", e.what());
  }
}

void Engine::fail(Active& a, std::exception_ptr error) {
  if (a.done) return;
  a.done = true;
  try {
    for (int s = 0; s < 2; ++s) a.tools->drop_pick(s);
  } catch (const std::exception& e) {
    log::error("after a failed step: {}", e.what());
  }
  a.tools->in_flight[0] = a.tools->in_flight[1] = false;
  pool_.release(a.slot);
  ++stats_.failed;
  publish();
  try {
    a.work->on_release();
    a.work->on_failure(std::move(error));
  } catch (const std::exception& e) {
    log::error("a request's failure report failed: {}", e.what());
  }
}

}  // namespace strata::runtime
