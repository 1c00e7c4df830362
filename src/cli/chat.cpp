// strata chat: an interactive chat in the terminal, on the engine directly (no server). The
// conversation is kept across turns and re-rendered with the model's chat template each turn;
// reasoning is shown dimmed, tool calls as text. Commands: /reset (forget the conversation),
// /exit (or end of input).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/model_loading.h"
#include "core/error.h"
#include "runtime/engine.h"
#include "runtime/request_queue.h"
#include "server/generation_stream.h"
#include "text/chat/chat_template.h"
#include "text/chat/output_parser.h"
#include "text/tokenizer.h"

namespace strata::cli {

namespace {

using text::chat::OrderedJson;

// Writes parsed output as it streams: reasoning dimmed (on a terminal), answer plain.
class TurnPrinter {
 public:
  explicit TurnPrinter(bool color) : color_(color) {}

  void print(const text::chat::ParsedDelta& d) {
    if (!d.reasoning_content.empty()) {
      if (!in_reasoning_) std::fputs(color_ ? "\x1b[2m" : "[thinking] ", stdout);
      in_reasoning_ = true;
      std::fputs(d.reasoning_content.c_str(), stdout);
    }
    if (!d.content.empty() || !d.tool_calls.empty()) end_reasoning();
    std::fputs(d.content.c_str(), stdout);
    for (const auto& call : d.tool_calls)
      std::printf("\n[tool call %s(%s)]", call.name.c_str(), call.arguments.c_str());
    std::fflush(stdout);
  }

  void end_reasoning() {
    if (!in_reasoning_) return;
    std::fputs(color_ ? "\x1b[0m\n" : "\n[answer] ", stdout);
    in_reasoning_ = false;
  }

 private:
  bool color_;
  bool in_reasoning_ = false;
};

OrderedJson assistant_message(const text::chat::ParsedMessage& m) {
  OrderedJson msg = {{"role", "assistant"}, {"content", m.content}};
  if (!m.reasoning_content.empty()) msg["reasoning_content"] = m.reasoning_content;
  if (m.has_tool_calls()) {
    msg["tool_calls"] = OrderedJson::array();
    for (const auto& call : m.tool_calls)
      msg["tool_calls"].push_back(
          {{"id", call.id},
           {"type", "function"},
           {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  }
  return msg;
}

}  // namespace

int run_chat(const ChatArgs& args) {
  runtime::SamplingParams sampling;
  sampling.temperature = args.temperature;
  sampling.top_k = args.top_k;
  sampling.top_p = args.top_p;
  sampling.min_p = args.min_p;
  runtime::normalize_greedy(sampling);
  runtime::check_sampling(sampling);  // before the model loads: a bad flag fails fast
  auto tokenizer = text::Tokenizer::load(args.model);
  const auto chat_template = text::chat::ChatTemplate::load(args.model, args.chat_template);
  auto model = model::load_model(args.model, load_options(args.settings, args.quantize));
  std::vector<int32_t> stop_ids = tokenizer->eos_ids();
  for (int32_t id : model->config().eos_token_ids)
    if (std::find(stop_ids.begin(), stop_ids.end(), id) == stop_ids.end()) stop_ids.push_back(id);
  const int64_t ctx_size = context_size(args.settings);
  runtime::Engine engine(std::move(model), engine_options(args.settings, ctx_size));
  // The server's pipeline: the engine on its own thread, each turn's text made here from the ids
  // it hands over (server::GenerationStream: detokenizer, output parser).
  runtime::RequestQueue queue(engine);
  const bool color = ::isatty(STDOUT_FILENO) != 0;
  const bool interactive = ::isatty(STDIN_FILENO) != 0;

  auto fresh_history = [&] {
    OrderedJson h = OrderedJson::array();
    if (!args.system.empty()) h.push_back({{"role", "system"}, {"content", args.system}});
    return h;
  };
  OrderedJson history = fresh_history();
  if (interactive)
    std::printf("strata chat with %s (/reset to start over, /exit to quit)\n", args.model.c_str());

  std::string line;
  uint64_t turn = 0;
  for (;;) {
    std::fputs("> ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line) || line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      history = fresh_history();
      std::puts("(conversation cleared)");
      continue;
    }
    if (line.empty()) continue;

    OrderedJson messages = history;
    messages.push_back({{"role", "user"}, {"content", line}});
    text::chat::ChatRequest request;
    request.messages = messages;
    if (args.no_thinking) request.kwargs["enable_thinking"] = false;
    const text::chat::RenderedPrompt prompt = chat_template.render(request);

    runtime::GenerationRequest generation;
    generation.prompt = tokenizer->encode(prompt.text, /*add_special_tokens=*/false);
    if (static_cast<int64_t>(generation.prompt.size()) >= ctx_size) {
      std::printf(
          "(the conversation is %zu tokens, beyond the context of %lld: /reset to start over)\n",
          generation.prompt.size(), static_cast<long long>(ctx_size));
      continue;
    }
    generation.max_tokens = args.max_tokens;
    generation.stop_ids = stop_ids;
    generation.sampling.temperature = args.temperature;
    generation.sampling.top_p = args.top_p;
    generation.sampling.top_k = args.top_k;
    generation.sampling.min_p = args.min_p;
    generation.sampling.seed = args.seed + turn++;
    runtime::normalize_greedy(generation.sampling);

    server::StreamSettings settings;
    settings.parser = chat_template.parser_config(prompt, nullptr);
    auto turn_stream = std::make_shared<server::GenerationStream>(*tokenizer, std::move(generation), std::move(settings));
    check(queue.submit(turn_stream), ErrorKind::kInternal, "the engine stopped");
    TurnPrinter printer(color);
    server::StreamUpdate update;
    do {
      update = turn_stream->wait(std::chrono::milliseconds(100));
      for (const server::StreamDelta& d : update.deltas) printer.print(d.text);
    } while (!update.done);
    printer.end_reasoning();
    check(update.error.empty(), ErrorKind::kInternal, "generation failed: {}", update.error);
    if (update.finish_reason == "length") std::fputs(" [cut off: --max-tokens]", stdout);
    std::fputs("\n", stdout);

    messages.push_back(assistant_message(turn_stream->message()));
    history = std::move(messages);
  }
  if (interactive) std::fputs("\n", stdout);
  return 0;
}

}  // namespace strata::cli
