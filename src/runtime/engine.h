// Engine: runs generation for one model, for many requests at once. Requests wait in arrival
// order until a state slot is free (runtime/state_pool.h), then run together, one step at a time:
// each step gives every request in its prompt a chunk of it (within a token budget, the chunks cut
// the same way whatever else runs) and every request past it one more token, picked where the
// logits lie. Per-request state (sampler, controller, stop ids, logprobs) lives beside its slot,
// so a request's tokens are exactly those it gets alone. generate() is one request run this way.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/memory.h"
#include "core/tensor.h"
#include "model/model.h"
#include "runtime/prefix_cache.h"
#include "runtime/sampler.h"
#include "runtime/sequence.h"
#include "runtime/speculative.h"
#include "runtime/state_pool.h"

namespace strata::runtime {

struct EngineOptions {
  int64_t context_size = 4096;  // tokens per sequence (prompt + generation)
  int64_t prefill_chunk = 512;  // prompt tokens per forward call
  // Running ahead (generate()): the step of each picked token is queued before the host reads the
  // token, so that a GPU never waits for the host between steps. kAuto: on a GPU (on the CPU it
  // gains nothing and wastes the step after the last token); kOn: on the CPU too, picking tokens
  // with the backend's ops as a GPU does; kOff: never (the run_ahead setting off, to compare).
  enum class RunAhead { kAuto, kOn, kOff } run_ahead = RunAhead::kAuto;
  // Requests that run at once: the state slots allocated at start, each of context_size tokens.
  int64_t parallel = 1;
  // Tokens a step may run: decodes count one each, and the requests in their prompts share the
  // rest in arrival order, in whole prefill_chunk pieces (the first always runs). 0: 16 ×
  // prefill_chunk. Measured on an H100 (9B 4-bit, 64 prompts of 512 tokens arriving together,
  // each sequence its own forward): 4 × prefill_chunk gave the last first token at 2.9 s, as each
  // of 16 steps also ran every earlier request's decode.
  int64_t step_tokens = 0;
  // KV blocks (StatePool::kBlockTokens tokens each) the slots share; 0: every slot's whole context,
  // so that no request ever waits for blocks. With fewer, the newest requests are preempted (their
  // KV swapped to host memory, then back) when the oldest need blocks.
  int64_t kv_blocks = 0;
  int64_t kv_block_tokens = StatePool::kBlockTokens;  // a power of two
  // Prompt prefixes kept for later requests (runtime/prefix_cache.h), at most this many in device
  // memory (0: off), and host memory for those moved out of it (0: they are dropped).
  int64_t prefix_cache = 0;
  size_t prefix_cache_host_bytes = 0;
  // The disk tier (runtime/state_store.h): a root directory (empty: off) holding a directory per
  // model and state layout, at most this many bytes of files. Each prompt's longest cached prefix
  // is written there, and prefixes dropped from host memory move there; they survive restarts.
  std::filesystem::path state_dir = {};
  uint64_t prefix_cache_disk_bytes = 0;
  bool prefix_cache_compress = false;  // the disk tier's files written compressed
  // The host tier's page-locked memory locked when the engine starts (a server: about 0.5 s per
  // GiB), rather than as demotions first need it (a one-shot command that may never demote).
  bool prefix_cache_lock_host = false;
  // Speculative decoding for requests that do not choose for themselves (method kDefault
  // here: off), and the drafts per verify step (0: 4; at most what the model verifies at once).
  SpeculativeParams speculative = {};
  // Each verify step's drafts follow the request's running acceptance and the measured cost of
  // each verify length (runtime::DraftLength), down to none while drafts do not pay; false: every
  // step verifies as many drafts as the drafter proposes, up to the request's maximum.
  bool speculative_adaptive = true;
  // The draft model of method kDraft (its vocabulary the model's), shared by the requests: each
  // drafts on a state of its own (runtime::ModelDrafter). Empty: kDraft is refused.
  std::shared_ptr<model::Model> draft_model = {};
  // Method kSelf: the model's first layers that draft (a request's SpeculativeParams::layers wins);
  // 0: a quarter of the model's layers, at least 1. Fewer than the model's layers.
  int64_t self_draft_layers = 0;
};

enum class FinishReason { kStop, kLength, kCancelled };
const char* finish_reason_name(FinishReason reason);

// What a TokenController wants done with a sampled token.
struct ControlDecision {
  bool keep = true;  // emit the sampled token (false: drop it; then `inject` must not be empty)
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

// Which tokens may come next (structured output: a JSON schema, a grammar, a tool call's shape).
// Before each pick the engine asks for the allowed tokens and sets every other logit to -inf
// (where the logits lie: backend::mask_logits), so the pick is the sampler's own among them; it
// then hands over every emitted token, sampled or injected. A constrained request never runs
// ahead (its next mask depends on the token just picked). Called on the engine thread only.
class OutputConstraint {
 public:
  virtual ~OutputConstraint() = default;
  // One bit per token id (bit i % 32 of words[i / 32]; words.size() = ceil(vocab / 32)), 1 =
  // allowed. false: nothing is constrained for this pick (words left unspecified).
  virtual bool allowed(std::span<uint32_t> words) = 0;
  virtual void on_emitted(int32_t token) = 0;
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
  std::vector<int32_t> stop_ids;          // end-of-generation tokens (not included in the output)
  TokenController* controller = nullptr;  // optional; not owned
  OutputConstraint* constraint = nullptr;  // optional; not owned
  // Log-probabilities: -1 off; 0..20 the sampled token's plus that many alternatives, passed to
  // on_logprob just before the token itself reaches the TokenCallback (injected tokens have none).
  int top_logprobs = -1;
  std::function<void(const TokenLogprob&)> on_logprob;
  bool prefix_cache = true;  // false: its prompt neither starts from a cached prefix nor leaves one
  // Token positions where the prompt's messages begin (a chat template's turns): the prefill cuts
  // a chunk there too and counts its prefill_chunk tokens on from there, so the prefix cache keeps
  // the state at each, and a later prompt with the same messages first is cut the same way up to
  // them. Positions outside the prompt are ignored. Empty: a cut every prefill_chunk tokens.
  std::vector<int64_t> boundaries;
  // A request that only leaves its prompt's prefixes in the cache (the next turn prefilled ahead):
  // it runs when nothing else waits, and is cancelled as soon as another request arrives.
  bool background = false;
  // Speculative decoding (runtime/speculative.h): the method (kDefault: the engine's) and drafts
  // per verify step (0: the engine's). Every row of a verify step is picked as plain decoding
  // picks at its position (sampling parameters, penalties, logit bias, constraint; sampled picks
  // take the request's random stream in the same order), so the tokens are those of plain
  // decoding, greedy or seeded. Models that cannot verify (Model::max_verify_tokens) decode plainly.
  SpeculativeParams speculative;
  Drafter* drafter = nullptr;  // optional, not owned: proposes instead of the method's drafter
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // emitted tokens, injected ones included
  int64_t injected_tokens = 0;
  FinishReason finish_reason = FinishReason::kLength;
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
  int64_t cached_tokens = 0;  // prompt tokens whose state came from the prefix cache
  CacheTier cached_tier = CacheTier::kNone;  // ... from this tier of it
  SpeculativeStats speculative;  // method kOff when the request did not speculate
};

// Called with each generated token; return false to stop (cancel).
using TokenCallback = std::function<bool(int32_t)>;

// One request given to Engine::add: the engine calls on_token for each token, then exactly one of
// on_release and then on_finish or on_error, all on the thread that calls step().
class Work {
 public:
  virtual ~Work() = default;
  // Returns false to stop generating (e.g. a stop string matched).
  virtual bool on_token(int32_t id) = 0;
  // The request holds no engine resource any more (called just before on_finish / on_error).
  virtual void on_release() {}
  // Once. A request cancelled before it ran gets an empty kCancelled result.
  virtual void on_finish(const GenerationResult& result) = 0;
  virtual void on_error(const std::string& message) = 0;
  // The engine failed the request: by default on_error with the error's message.
  virtual void on_failure(std::exception_ptr error);

  // Any thread: the engine ends the request within one step.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  GenerationRequest request;

 private:
  std::atomic<bool> cancelled_{false};
};

struct EngineStats {
  int64_t running = 0;  // requests holding a slot
  int64_t waiting = 0;  // added, not yet running
  int64_t slots = 0;
  int64_t slots_free = 0;
  uint64_t steps = 0;            // steps run
  uint64_t step_tokens = 0;      // tokens the model ran in them (prompt chunks and decoded tokens)
  uint64_t step_requests = 0;    // requests in them, summed over steps
  uint64_t decode_forwards = 0;  // model steps that ran decode tokens (one per group of sequences)
  uint64_t decode_tokens = 0;    // the decode tokens they ran
  int64_t kv_blocks = 0;         // in the pool
  int64_t kv_blocks_free = 0;
  int64_t swapped = 0;           // running requests preempted now (their KV in host memory)
  uint64_t preemptions = 0;      // swaps out
  uint64_t resumptions = 0;      // swaps back in
  uint64_t prefix_hits = 0;      // requests that started from a cached prefix
  uint64_t prefix_misses = 0;    // requests that found none (the cache on)
  uint64_t cached_tokens = 0;    // prompt tokens those hits did not run
  PrefixCacheStats prefix;       // the cache's tiers: entries, bytes, hits, evictions, disk I/O
  uint64_t finished = 0;         // ran to a stop or length
  uint64_t cancelled = 0;        // by their client (Work::cancel or a false on_token)
  uint64_t failed = 0;           // invalid, or the engine threw
  uint64_t prompt_tokens = 0;    // of requests whose prompt ran
  uint64_t generated_tokens = 0;
  uint64_t verify_steps = 0;        // speculative verify steps
  uint64_t drafted_tokens = 0;      // draft tokens they checked
  uint64_t accepted_tokens = 0;     // of them, those accepted
  double prefill_seconds = 0;  // summed over requests
  double decode_seconds = 0;
};

class Engine {
 public:
  Engine(std::unique_ptr<model::Model> model, EngineOptions options);
  ~Engine();
  const model::Model& model() const { return *model_; }
  model::Model& model() { return *model_; }
  const EngineOptions& options() const { return options_; }
  size_t state_bytes() const { return pool_.bytes(); }  // slots and KV pools

  // One request, run to its end on this thread (the engine must be idle). Throws on invalid input.
  GenerationResult generate(const GenerationRequest& request, const TokenCallback& on_token = {});

  // Many requests: add() queues one (it runs when a slot is free), step() runs one step of every
  // running request. Invalid requests end with on_error. Not thread-safe: one thread adds and
  // steps.
  void add(std::shared_ptr<Work> work);
  void step();
  bool idle() const;          // nothing running or waiting
  void cancel_all();          // every running and waiting request (they end at the next step)
  EngineStats stats() const;  // any thread

 private:
  struct Active;     // a running request: its slot, sampler, picks in flight
  struct SlotTools;  // per slot: logits, picked ids and their way back, the sampler's edits

  void validate(const GenerationRequest& request) const;
  // Self-speculation: the first layers that draft for a request asking for `layers` (0: the
  // engine's), refused (kInvalidInput) unless fewer than the model's; and the view of the model's
  // first that many layers (Model::first_layers), made on first use.
  int64_t self_draft_layers(int64_t layers) const;
  model::Model& self_draft(int64_t layers);
  void yield_background();  // background requests give way to any other waiting
  void admit();
  // Where a request's prefill cuts its prompt (runtime/prefix_cache.h), short of its end: at its
  // boundaries, and every prefill_chunk tokens from each; and the prefix cache's keys there.
  struct Cuts {
    std::vector<int64_t> at;
    std::vector<uint64_t> keys;
  };
  Cuts cuts(const GenerationRequest& request) const;
  void start(std::shared_ptr<Work> work, int slot, int64_t cached, CacheTier tier, Cuts cuts);
  bool may_run_ahead_now(const Active& a) const;
  void run_ahead_all();            // phase 1
  void read_pick(Active& a);       // phase 2
  // The decision on a picked token (its stop ids, its controller); nullopt when it ended the
  // request. Then apply() emits what the decision says; true when the request goes on with exactly
  // the picked token fed next (kept, nothing injected, no stop).
  std::optional<ControlDecision> decide(Active& a, int32_t token);
  bool apply(Active& a, int32_t token, const ControlDecision& decision);
  // Speculation: a verify step of a's token and its drafts (false: no drafts, decode plainly),
  // and the reading of its picks, row by row, as plain decoding would read them one step at a time.
  bool verify(Active& a, int64_t& budget, int64_t others);  // others: requests decoding beside it
  void read_verify(Active& a);
  // Requests that decode in this step (prefilled, running), and whether a speculating one decodes
  // plainly next (its DraftLength says no drafts, or it has no maximum): then it may run ahead.
  int64_t decoding_now() const;
  bool plain_next(const Active& a) const;
  // Shadow drafts (DraftLength): proposed at a plain step when the drafter's time allows, settled
  // once the tokens that follow agree with all of them or refuse one.
  void shadow_propose(Active& a);
  void settle_shadow(Active& a);
  void count_propose(Active& a, std::chrono::steady_clock::time_point since);
  void feed_all(int64_t& budget);  // phase 3's decodes
  bool decode_batch();             // entries_ as batched steps; false (batch_ failed) on an error
  void prefill(Active& a);
  // Blocks for a's next `tokens` tokens, preempting newer requests when too few are free; false
  // when a itself had to give way (then it is swapped out, and waits).
  bool room(Active& a, int64_t tokens);
  void preempt(Active& a);
  void resume_swapped();  // oldest first, while blocks allow
  int64_t swapped_now() const;  // running requests swapped out
  void queue_pick(Active& a, int s);
  // The picks of a step's decodes (those of `batch` that pick on the device), each into its slot
  // (ahead: the other one): the greedy ones with no logit edits or mask as one argmax over their
  // rows, the others one by one. A request whose pick fails fails alone.
  void queue_picks(std::span<Active* const> batch, bool ahead);
  int32_t await_pick(Active& a, int s);
  int32_t host_pick(Active& a);
  void mask_on_host(Active& a, std::span<float> logits);  // the request's OutputConstraint
  void edit_on_device(Active& a, const Tensor& logits);
  void mask_on_device(Active& a, const Tensor& logits);  // the request's OutputConstraint
  void finish(Active& a);
  void fail(Active& a, std::exception_ptr error);

  std::unique_ptr<model::Model> model_;
  EngineOptions options_;
  // Method kSelf's draft models: views of model_'s first layers, one per layer count asked for,
  // shared by the requests (each drafts on a Sequence of its own, ModelDrafter). After model_, so
  // destroyed before it: a view must not outlive its model.
  std::map<int64_t, std::unique_ptr<model::Model>> self_drafts_;
  StatePool pool_;
  PrefixCache cache_;  // after pool_: its entries give their blocks back first
  bool waiting_for_disk_ = false;  // the first waiting request waits for a cached prefix's file
  std::vector<std::unique_ptr<SlotTools>> tools_;  // one per slot
  HostTensor logits_;                              // a host pick's logits (what the sampler reads)
  // A step's decodes run together (forward_decode): the requests, their entries, the model's items.
  std::vector<Active*> batch_;
  std::vector<DecodeEntry> entries_;
  std::vector<model::DecodeItem> items_;
  // What verify steps cost (a step of one sequence alone, timed from one step's picks to the
  // next's): the step being queued ran one request's `lone_tokens_` tokens and nothing else (0: it
  // ran more, or a prompt); its time is known when the next step has read its picks.
  StepCosts step_costs_;
  int64_t lone_tokens_ = 0, step_requests_ = 0;
  bool step_prefilled_ = false;
  std::chrono::steady_clock::time_point last_read_;
  std::vector<Active*> greedy_;  // queue_picks' rows picked together, with their logits and tokens
  std::vector<Tensor> greedy_logits_, greedy_tokens_;
  std::deque<std::shared_ptr<Work>> waiting_;
  std::vector<std::unique_ptr<Active>> running_;  // in admission order
  void publish();                                 // stats_ with the live counts, to published_
  EngineStats stats_;                             // the engine thread's
  mutable std::mutex stats_mutex_;
  EngineStats published_;  // what stats() returns, on any thread
};

}  // namespace strata::runtime
