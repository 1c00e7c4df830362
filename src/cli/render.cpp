// strata render: prints exactly the prompt a model's chat template makes of a conversation (the
// text the server would tokenize), for checking templates, tools and kwargs by eye or in scripts.
#include <cstdio>
#include <iostream>
#include <iterator>

#include "cli/commands.h"
#include "core/json.h"
#include "core/json_limits.h"
#include "core/mmap.h"
#include "text/chat/chat_template.h"

namespace strata::cli {

namespace {

using text::chat::OrderedJson;

OrderedJson read_ordered_json(const std::string& path) {
  const std::string text =
      path == "-" ? std::string(std::istreambuf_iterator<char>(std::cin), {}) : read_file(path);
  // The server's limits, so that what renders here is what a request may hold.
  return parse_limited_json_or_throw(text, path);
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 2;
}

}  // namespace

int run_render(const RenderArgs& args) {
  if (args.model.empty() && args.template_file.empty()) {
    return usage_error("render needs --model or --template");
  }
  OrderedJson kwargs = OrderedJson::object();
  if (!args.kwargs.empty()) {
    LimitedJson parsed = parse_limited_json(args.kwargs);
    kwargs = std::move(parsed.value);
    if (!parsed.ok() || !kwargs.is_object()) {
      return usage_error("--kwargs must be a JSON object, e.g. '{\"enable_thinking\": false}'");
    }
  }

  // The messages file holds a list of messages, or a request body with "messages" (and maybe
  // "tools", "chat_template_kwargs", "reasoning_effort").
  text::chat::ChatRequest request;
  const OrderedJson input = read_ordered_json(args.messages);
  if (input.is_object()) {
    check(input.contains("messages"), ErrorKind::kInvalidInput,
          "{}: expected a list of messages or an object with \"messages\"", args.messages);
    request.messages = input["messages"];
    if (input.contains("tools")) request.tools = input["tools"];
    if (input.contains("chat_template_kwargs")) request.kwargs = input["chat_template_kwargs"];
    if (input.contains("reasoning_effort") && input["reasoning_effort"].is_string()) {
      request.reasoning_effort = input["reasoning_effort"].get<std::string>();
    }
  } else {
    request.messages = input;
  }
  if (!args.tools.empty()) request.tools = read_ordered_json(args.tools);
  if (!request.kwargs.is_object()) request.kwargs = OrderedJson::object();
  for (const auto& [name, value] : kwargs.items()) request.kwargs[name] = value;
  request.add_generation_prompt = args.add_generation_prompt;

  const auto chat_template = args.model.empty()
                                 ? text::chat::ChatTemplate::from_file(args.template_file)
                                 : text::chat::ChatTemplate::load(args.model, args.template_file);
  const std::string prompt = chat_template.render(request).text;
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace strata::cli
