// Tokens to text deltas on the engine thread, handed to the HTTP thread under a mutex.
#include "server/generation_stream.h"

namespace strata::server {

using text::chat::ParsedDelta;

namespace {

bool text_only(const ParsedDelta& d) { return d.tool_calls.empty(); }

// Appends `delta`, merging it into the last one when both carry text of the same single kind.
void append(std::vector<ParsedDelta>& deltas, ParsedDelta delta) {
  if (delta.empty()) return;
  if (!deltas.empty()) {
    ParsedDelta& last = deltas.back();
    const bool both_content = last.reasoning_content.empty() && delta.reasoning_content.empty();
    const bool both_reasoning = last.content.empty() && delta.content.empty();
    if (text_only(last) && text_only(delta) && (both_content || both_reasoning)) {
      last.content += delta.content;
      last.reasoning_content += delta.reasoning_content;
      return;
    }
  }
  deltas.push_back(std::move(delta));
}

}  // namespace

GenerationStream::GenerationStream(const text::Tokenizer& tokenizer, bool skip_special_tokens,
                                   std::vector<std::string> stops,
                                   std::optional<text::chat::ParserConfig> parser)
    : detokenizer_(tokenizer, skip_special_tokens), stops_(std::move(stops)) {
  if (parser) parser_.emplace(std::move(*parser));
}

StreamUpdate GenerationStream::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return pending_.done || !pending_.deltas.empty(); });
  StreamUpdate taken = std::move(pending_);
  pending_ = StreamUpdate{};
  pending_.done = taken.done;  // done stays visible to later calls
  pending_.finish_reason = taken.finish_reason;
  pending_.error = taken.error;
  return taken;
}

double GenerationStream::seconds_to_first_token() const {
  if (!first_token_) return 0;
  return std::chrono::duration<double>(*first_token_ - created_).count();
}

void GenerationStream::emit(std::string_view text, bool at_end) {
  ParsedDelta delta;
  if (parser_) {
    delta = parser_->push(text);
    if (at_end) {
      ParsedDelta rest = parser_->finish();
      delta.content += rest.content;
      delta.reasoning_content += rest.reasoning_content;
      for (auto& call : rest.tool_calls) delta.tool_calls.push_back(std::move(call));
    }
  } else {
    delta.content = std::string(text);
    message_.content += delta.content;
  }
  if (delta.empty()) return;
  std::lock_guard lock(mutex_);
  append(pending_.deltas, std::move(delta));
  changed_.notify_all();
}

bool GenerationStream::on_token(int32_t id) {
  if (!first_token_) first_token_ = std::chrono::steady_clock::now();
  ++completion_tokens_;
  const control::StopStringMatcher::Result r = stops_.push(detokenizer_.push(id));
  emit(r.text, false);
  return !r.stopped;
}

void GenerationStream::on_finish(const runtime::GenerationResult& result) {
  result_ = result;
  std::string reason = runtime::finish_reason_name(result.finish_reason);
  if (stops_.stopped()) {
    reason = "stop";
    emit("", true);
  } else {
    const control::StopStringMatcher::Result r = stops_.push(detokenizer_.flush());
    emit(r.text + (r.stopped ? std::string() : stops_.flush()), true);
    if (r.stopped) reason = "stop";
  }
  if (parser_) message_ = parser_->result();
  if (reason == "stop" && message_.has_tool_calls()) reason = "tool_calls";
  std::lock_guard lock(mutex_);
  pending_.done = true;
  pending_.finish_reason = reason;
  changed_.notify_all();
}

void GenerationStream::on_error(const std::string& message) {
  std::lock_guard lock(mutex_);
  pending_.done = true;
  pending_.finish_reason = "error";
  pending_.error = message.empty() ? "generation failed" : message;
  changed_.notify_all();
}

}  // namespace strata::server
