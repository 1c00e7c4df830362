// GenerationStream: one request's generation as text. On the engine thread each token passes the
// streaming detokenizer, the stop strings and the output parser (reasoning / content / tool
// calls); the resulting deltas wait here until the request's HTTP thread takes them. Stopping is
// immediate: the token that completes a stop string is the last one computed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "control/stop_strings.h"
#include "server/generation_queue.h"
#include "text/chat/output_parser.h"
#include "text/tokenizer.h"

namespace strata::server {

struct StreamUpdate {
  std::vector<text::chat::ParsedDelta> deltas;  // in order; adjacent same-kind text merged
  bool done = false;
  std::string finish_reason;  // when done: "stop", "length", "tool_calls" or "cancelled"
  std::string error;          // when done: non-empty if the engine failed
};

class GenerationStream : public GenerationJob {
 public:
  // parser: for chat (reasoning and tool calls); without it all text is content.
  GenerationStream(const text::Tokenizer& tokenizer, bool skip_special_tokens,
                   std::vector<std::string> stops, std::optional<text::chat::ParserConfig> parser);

  // HTTP thread: waits up to `timeout` for something new and takes it.
  StreamUpdate wait(std::chrono::milliseconds timeout);

  // Valid once done.
  const text::chat::ParsedMessage& message() const { return message_; }
  int64_t completion_tokens() const { return completion_tokens_; }
  double seconds_to_first_token() const;  // from construction (queue wait + prefill)
  double prefill_seconds() const { return result_.prefill_seconds; }
  double decode_seconds() const { return result_.decode_seconds; }

  bool on_token(int32_t id) override;
  void on_finish(const runtime::GenerationResult& result) override;
  void on_error(const std::string& message) override;

 private:
  void emit(std::string_view text, bool at_end);  // after the stop strings: parse and queue

  // Engine thread only.
  text::StreamingDetokenizer detokenizer_;
  control::StopStringMatcher stops_;
  std::optional<text::chat::OutputParser> parser_;

  std::mutex mutex_;
  std::condition_variable changed_;
  StreamUpdate pending_;
  bool done_ = false;
  text::chat::ParsedMessage message_;
  int64_t completion_tokens_ = 0;
  runtime::GenerationResult result_;
  const std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> first_token_;
};

}  // namespace strata::server
