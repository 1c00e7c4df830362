// Token ids handed over under a mutex; text deltas made on the HTTP thread.
#include "server/generation_stream.h"

namespace strata::server {

using text::chat::ParsedDelta;

namespace {

bool text_only(const ParsedDelta& d) { return d.tool_calls.empty(); }

int64_t count_chars(std::string_view utf8) {
  int64_t n = 0;
  for (unsigned char c : utf8) n += (c & 0xC0) != 0x80;  // continuation bytes do not start one
  return n;
}

// Appends `delta`, merging it into the last one when both carry text of the same single kind (or
// it carries only log-probabilities).
void append(std::vector<StreamDelta>& deltas, StreamDelta delta) {
  if (delta.text.empty() && delta.logprobs.empty()) return;
  if (!deltas.empty()) {
    StreamDelta& last = deltas.back();
    const ParsedDelta& a = last.text;
    const ParsedDelta& b = delta.text;
    const bool both_content = a.reasoning_content.empty() && b.reasoning_content.empty();
    const bool both_reasoning = a.content.empty() && b.content.empty();
    if (b.empty() || (text_only(a) && text_only(b) && (both_content || both_reasoning))) {
      last.text.content += b.content;
      last.text.reasoning_content += b.reasoning_content;
      last.logprobs.insert(last.logprobs.end(), delta.logprobs.begin(), delta.logprobs.end());
      return;
    }
  }
  deltas.push_back(std::move(delta));
}

}  // namespace

GenerationStream::GenerationStream(const text::Tokenizer& tokenizer,
                                   runtime::GenerationRequest generation, StreamSettings settings)
    : detokenizer_(tokenizer, settings.skip_special_tokens),
      stops_(std::move(settings.stops)),
      think_(std::move(settings.think)),
      top_logprobs_(settings.top_logprobs) {
  if (settings.parser) parser_.emplace(std::move(*settings.parser));
  request = std::move(generation);
  request.controller = think_.get();
  if (settings.opening) {
    opening_ = std::make_unique<control::AnswerOpening>(std::move(*settings.opening), think_.get());
    request.controller = opening_.get();
  }
  if (settings.constraint) {
    constraint_ = std::make_unique<control::OutputConstraint>(std::move(*settings.constraint));
    request.constraint = constraint_.get();
  }
  if (top_logprobs_ >= 0) {
    request.top_logprobs = top_logprobs_;
    request.on_logprob = [this](const runtime::TokenLogprob& logprob) { on_logprob(logprob); };
  }
}

StreamUpdate GenerationStream::wait(std::chrono::milliseconds timeout) {
  std::vector<Token> tokens;
  std::optional<runtime::GenerationResult> ended;
  std::optional<std::string> error;
  ErrorKind error_kind = ErrorKind::kInternal;
  if (!pending_.done) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, timeout, [&] { return !incoming_.empty() || ended_ || error_; });
    tokens.swap(incoming_);
    ended = ended_;
    error = error_;
    error_kind = error_kind_;
  }
  for (Token& t : tokens) take(std::move(t));
  if (error) {
    pending_.done = true;
    pending_.finish_reason = "error";
    pending_.error = error->empty() ? "generation failed" : *error;
    pending_.error_kind = error_kind;
  } else if (ended && !pending_.done) {
    end(*ended);
  }
  StreamUpdate taken = std::move(pending_);
  pending_ = StreamUpdate{};
  pending_.done = taken.done;  // done stays visible to later calls
  pending_.finish_reason = taken.finish_reason;
  pending_.error = taken.error;
  pending_.error_kind = taken.error_kind;
  return taken;
}

double GenerationStream::seconds_to_first_token() const {
  if (!first_token_) return 0;
  return std::chrono::duration<double>(*first_token_ - created_).count();
}

void GenerationStream::queue(StreamDelta delta) {
  logprobs_.insert(logprobs_.end(), delta.logprobs.begin(), delta.logprobs.end());
  append(pending_.deltas, std::move(delta));
}

void GenerationStream::emit(std::string_view text, bool at_end) {
  passed_chars_ += count_chars(text);
  if (stops_.stopped())  // tokens whose text lies wholly past the stop string are dropped
    std::erase_if(held_, [&](const OutputLogprob& e) { return e.text_offset >= passed_chars_; });
  StreamDelta delta;
  if (parser_) {
    delta.text = parser_->push(text);
    if (at_end) {
      ParsedDelta rest = parser_->finish();
      delta.text.content += rest.content;
      delta.text.reasoning_content += rest.reasoning_content;
      for (auto& call : rest.tool_calls) delta.text.tool_calls.push_back(std::move(call));
    }
    const size_t max_calls = parser_->config().max_tool_calls;
    calls_complete_ = max_calls > 0 && parser_->result().tool_calls.size() >= max_calls;
  } else {
    delta.text.content = std::string(text);
    message_.content += delta.text.content;
  }
  if (delta.text.empty()) return;
  delta.logprobs = std::move(held_);
  held_.clear();
  queue(std::move(delta));
}

void GenerationStream::on_logprob(const runtime::TokenLogprob& logprob) { next_logprob_ = logprob; }

bool GenerationStream::on_token(int32_t id) {
  Token token{id, std::nullopt};
  if (think_) {  // the controller has seen this token (engine thread, as here)
    token.reasoning = think_->report().reasoning_tokens;
    token.answer = think_->report().answer_tokens;
  }
  if (top_logprobs_ >= 0) {
    OutputLogprob entry;
    if (next_logprob_ && next_logprob_->token == id) {
      entry.value = std::move(*next_logprob_);
    } else {  // injected by the controller: certain
      entry.value.token = id;
      if (top_logprobs_ > 0) entry.value.top = {{id, 0.0f}};
    }
    token.logprob = std::move(entry);
  }
  next_logprob_.reset();
  {
    std::lock_guard lock(mutex_);
    if (!first_token_) first_token_ = std::chrono::steady_clock::now();
    incoming_.push_back(std::move(token));
  }
  changed_.notify_all();
  return !stop_.load(std::memory_order_relaxed);
}

void GenerationStream::take(Token token) {
  if (stop_.load(std::memory_order_relaxed)) return;  // computed after the text ended: dropped
  ++completion_tokens_;
  kept_reasoning_ = token.reasoning;
  kept_answer_ = token.answer;
  if (token.logprob) {
    token.logprob->text_offset = decoded_chars_;
    held_.push_back(std::move(*token.logprob));
  }
  const std::string piece = detokenizer_.push(token.id);
  decoded_chars_ += count_chars(piece);
  const control::StopStringMatcher::Result r = stops_.push(piece);
  emit(r.text, false);
  if (r.stopped || calls_complete_) stop_.store(true, std::memory_order_relaxed);
}

std::optional<control::ThinkReport> GenerationStream::think_report() const {
  if (!think_) return std::nullopt;
  control::ThinkReport r = think_->report();
  if (stops_.stopped() || calls_complete_) {  // the text ended before the engine did
    r.reasoning_tokens = kept_reasoning_;
    r.answer_tokens = kept_answer_;
  }
  return r;
}

void GenerationStream::end(const runtime::GenerationResult& result) {
  result_ = result;
  std::string reason = runtime::finish_reason_name(result.finish_reason);
  if (stops_.stopped() || calls_complete_) {
    reason = "stop";
    emit("", true);
  } else {
    const std::string piece = detokenizer_.flush();
    decoded_chars_ += count_chars(piece);
    const control::StopStringMatcher::Result r = stops_.push(piece);
    emit(r.text + (r.stopped ? std::string() : stops_.flush()), true);
    if (r.stopped) reason = "stop";
  }
  // Entries of tokens whose text no delta carried (whitespace the parser dropped, say).
  StreamDelta rest;
  rest.logprobs = std::move(held_);
  held_.clear();
  queue(std::move(rest));
  if (parser_) message_ = parser_->result();
  if (reason == "stop" && message_.has_tool_calls()) reason = "tool_calls";
  pending_.done = true;
  pending_.finish_reason = reason;
}

void GenerationStream::on_finish(const runtime::GenerationResult& result) {
  {
    std::lock_guard lock(mutex_);
    ended_ = result;
  }
  changed_.notify_all();
}

void GenerationStream::on_error(const std::string& message) { fail(message, ErrorKind::kInternal); }

void GenerationStream::on_failure(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    fail(e.what(), e.kind());
  } catch (const std::exception& e) {
    fail(e.what(), ErrorKind::kInternal);
  } catch (...) {
    fail("unknown error", ErrorKind::kInternal);
  }
}

void GenerationStream::fail(const std::string& message, ErrorKind kind) {
  {
    std::lock_guard lock(mutex_);
    error_ = message;
    error_kind_ = kind;
  }
  changed_.notify_all();
}

}  // namespace strata::server
