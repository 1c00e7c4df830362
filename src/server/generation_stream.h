// GenerationStream: one request's generation as text. The engine thread only hands over each token
// id (with its log-probability) and the end; the request's HTTP thread, in wait(), passes them
// through the streaming detokenizer, the stop strings and the output parser (reasoning / content /
// tool calls), so text work never holds up an engine step that serves every request. A stop
// string (or the last tool call the parser may take) asks the engine to end the request; tokens it
// computed meanwhile (a step or two) are dropped, so the answer, its usage and its logprobs end
// at the token that completed the stop. A stream may also carry the request's think controller
// (wrapped by a forced answer opening; it runs on the engine thread) and collect per-token
// log-probabilities.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "control/answer_opening.h"
#include "control/output_constraint.h"
#include "control/stop_strings.h"
#include "control/think_control.h"
#include "core/error.h"
#include "server/generation_queue.h"
#include "server/openai_response.h"
#include "text/chat/output_parser.h"
#include "text/tokenizer.h"

namespace strata::server {

// Text the client may see now, with the log-probabilities of the tokens that brought it. A token
// whose text is held back (a possible stop string, a tag the parser has not settled) has its entry
// in the delta that finally carries text; every entry appears once, in order.
struct StreamDelta {
  text::chat::ParsedDelta text;
  std::vector<OutputLogprob> logprobs;  // empty unless log-probabilities were asked for
};

struct StreamUpdate {
  std::vector<StreamDelta> deltas;  // in order; adjacent same-kind text merged
  bool done = false;
  std::string finish_reason;  // when done: "stop", "length", "tool_calls" or "cancelled"
  std::string error;          // when done: non-empty if the engine failed
  // The failure's kind: invalid input for the request's own fault (its output constraint over the
  // work budget mid-answer), a client error; internal (a server error) for anything else.
  ErrorKind error_kind = ErrorKind::kInternal;
};

struct StreamSettings {
  bool skip_special_tokens = false;
  std::vector<std::string> stops;
  std::optional<text::chat::ParserConfig> parser;  // chat: reasoning and tool calls
  int top_logprobs = -1;  // -1: no log-probabilities; else alternatives per token (0..20)
  std::unique_ptr<control::ThinkController> think;  // optional; becomes the request's controller
  // A forced answer opening (tool_choice "required" or named); wraps `think` as the controller.
  std::optional<control::OpeningSettings> opening;
  // Structured output (response_format, the grammar field, tool calls): the request's constraint.
  std::optional<control::ConstraintSettings> constraint;
};

class GenerationStream : public GenerationJob {
 public:
  // Takes the engine request and wires the settings' controller and log-probabilities into it.
  GenerationStream(const text::Tokenizer& tokenizer, runtime::GenerationRequest generation,
                   StreamSettings settings);

  // HTTP thread (one at a time): waits up to `timeout` for something new, turns what the engine
  // handed over into text, and takes it.
  StreamUpdate wait(std::chrono::milliseconds timeout);

  // Valid once wait() returned done.
  const text::chat::ParsedMessage& message() const { return message_; }
  const std::vector<OutputLogprob>& logprobs() const { return logprobs_; }  // every entry sent
  // The think controller's report as of the last token the answer kept (none without a controller):
  // the controller runs on the engine thread and may see a token or two computed after a stop
  // string ended the text; its counts are taken back to the last kept token (its flags stand).
  std::optional<control::ThinkReport> think_report() const;
  int64_t completion_tokens() const { return completion_tokens_; }
  // The stop string that ended the text ("" when none did).
  const std::string& stop_sequence() const { return stops_.matched(); }
  double seconds_to_first_token() const;  // from construction (queue wait + prefill)
  double prefill_seconds() const { return result_.prefill_seconds; }
  int64_t cached_tokens() const { return result_.cached_tokens; }
  runtime::CacheTier cached_tier() const { return result_.cached_tier; }
  const runtime::SpeculativeStats& speculative() const { return result_.speculative; }
  double decode_seconds() const { return result_.decode_seconds; }

  // Engine thread.
  bool on_token(int32_t id) override;
  void on_finish(const runtime::GenerationResult& result) override;
  void on_error(const std::string& message) override;
  void on_failure(std::exception_ptr error) override;  // keeps a strata::Error's kind

 private:
  struct Token {  // what the engine hands over
    int32_t id = 0;
    std::optional<OutputLogprob> logprob;  // when log-probabilities were asked for
    int64_t reasoning = 0, answer = 0;     // the think controller's counts with this token
  };

  void on_logprob(const runtime::TokenLogprob& logprob);  // engine: just before its on_token
  void take(Token token);                                 // one token's text
  void end(const runtime::GenerationResult& result);      // the generation's end
  void fail(const std::string& message, ErrorKind kind);  // engine: the generation failed
  void emit(std::string_view text, bool at_end);          // after the stop strings: parse and queue
  void queue(StreamDelta delta);

  // Engine thread only.
  std::optional<runtime::TokenLogprob> next_logprob_;  // the engine's, for the coming token
  // Set by the HTTP thread when the text has ended (a stop string, the last tool call): the engine
  // stops the request at its next token.
  std::atomic<bool> stop_{false};

  // Handed over under the mutex.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Token> incoming_;
  std::optional<runtime::GenerationResult> ended_;  // on_finish's
  std::optional<std::string> error_;                // on_error's or on_failure's
  ErrorKind error_kind_ = ErrorKind::kInternal;
  std::optional<std::chrono::steady_clock::time_point> first_token_;

  // HTTP thread only.
  text::StreamingDetokenizer detokenizer_;
  control::StopStringMatcher stops_;
  std::optional<text::chat::OutputParser> parser_;
  std::unique_ptr<control::ThinkController> think_;
  std::unique_ptr<control::AnswerOpening> opening_;  // wraps think_
  std::unique_ptr<control::OutputConstraint> constraint_;  // engine thread
  bool calls_complete_ = false;  // the parser's max_tool_calls are all parsed: generation ends
  int top_logprobs_ = -1;
  std::vector<OutputLogprob> held_;  // entries of tokens whose text no delta has carried yet
  int64_t kept_reasoning_ = 0, kept_answer_ = 0;  // the controller's counts at the last kept token
  int64_t decoded_chars_ = 0;        // characters the detokenizer produced
  int64_t passed_chars_ = 0;         // characters that got past the stop strings
  StreamUpdate pending_;             // what the next wait() returns
  text::chat::ParsedMessage message_;
  std::vector<OutputLogprob> logprobs_;
  int64_t completion_tokens_ = 0;
  runtime::GenerationResult result_;
  const std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
};

}  // namespace strata::server
