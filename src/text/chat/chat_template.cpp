// ChatTemplate: holds the parsed template(s), builds the render context the way Hugging Face's
// apply_chat_template does, and decides once per template whether it takes content-part lists.
#include "text/chat/chat_template.h"

#include <utility>

#include "core/error.h"

namespace strata::text::chat {

namespace {

struct Parsed {
  std::string source;
  jinja::Template tpl;
};

Parsed parse_template(std::string source, const std::string& origin,
                      const jinja::Options& options) {
  try {
    jinja::Template tpl(source, options);
    return Parsed{std::move(source), std::move(tpl)};
  } catch (const Error& e) {
    throw Error(ErrorKind::kInvalidInput, origin + ": chat template does not parse: " + e.what());
  }
}

// Names the template must own: chat_template_kwargs may not replace them.
bool is_reserved_variable(const std::string& name) {
  return name == "messages" || name == "tools" || name == "documents" ||
         name == "add_generation_prompt";
}

}  // namespace

struct ChatTemplate::Impl {
  std::string origin;
  SpecialTokens tokens;
  Parsed main;
  std::map<std::string, Parsed> named;  // other named templates ("tool_use", "rag", ...)
  bool keeps_parts = false;
  ToolCallFormat tool_format = ToolCallFormat::kNone;
  bool mistral_args = false;  // Mistral calls written as [TOOL_CALLS]NAME[ARGS]{...}
  ReasoningTags reasoning_tags;

  // The context HF builds: messages, tools, documents, add_generation_prompt, special tokens.
  OrderedJson base_context(OrderedJson messages, bool add_generation_prompt) const {
    OrderedJson context = OrderedJson::object();
    context["messages"] = std::move(messages);
    context["tools"] = nullptr;
    context["documents"] = nullptr;
    context["add_generation_prompt"] = add_generation_prompt;
    for (const auto& [name, text] : tokens) context[name] = text;
    return context;
  }

  // A template takes content parts when it renders a one-text-part list exactly as it renders the
  // same text as a string. Templates that raise on a list, print its repr or JSON, or drop it
  // (all seen among real templates) get strings.
  bool probe_content_parts() const {
    const std::string text = "Strata probe: 7 + 5 = 12.";
    const OrderedJson as_string = {{{"role", "user"}, {"content", text}}};
    const OrderedJson as_parts = {
        {{"role", "user"}, {"content", {{{"type", "text"}, {"text", text}}}}}};
    try {
      return main.tpl.render(base_context(as_string, false)) ==
             main.tpl.render(base_context(as_parts, false));
    } catch (const Error&) {
      return false;  // a template that cannot render a lone user turn is given strings
    }
  }
};

ChatTemplate::ChatTemplate(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

ChatTemplate ChatTemplate::from_source(std::string source, SpecialTokens tokens, std::string origin,
                                       std::map<std::string, std::string> named,
                                       const jinja::Options& options) {
  Parsed main = parse_template(std::move(source), origin, options);
  auto impl = std::unique_ptr<Impl>(new Impl{std::move(origin),
                                             std::move(tokens),
                                             std::move(main),
                                             {},
                                             false,
                                             ToolCallFormat::kNone,
                                             false,
                                             {}});
  for (auto& [name, text] : named) {
    impl->named.emplace(name,
                        parse_template(std::move(text), impl->origin + " (" + name + ")", options));
  }
  impl->keeps_parts = impl->probe_content_parts();
  impl->tool_format = detect_tool_call_format(impl->main.source);
  impl->mistral_args = impl->main.source.find("[ARGS]") != std::string::npos;
  impl->reasoning_tags = detect_reasoning_tags(impl->main.source);
  return ChatTemplate(std::move(impl));
}

RenderedPrompt ChatTemplate::render(const ChatRequest& request) const {
  const bool has_tools = request.tools.is_array() && !request.tools.empty();
  check(request.tools.is_null() || request.tools.is_array(), ErrorKind::kInvalidInput,
        "tools must be a list");
  check(request.kwargs.is_null() || request.kwargs.is_object(), ErrorKind::kInvalidInput,
        "chat_template_kwargs must be an object");

  OrderedJson context = impl_->base_context(
      normalize_messages(request.messages, impl_->keeps_parts), request.add_generation_prompt);
  if (has_tools) context["tools"] = request.tools;
  if (request.reasoning_effort) {
    if (*request.reasoning_effort == "none") {
      context["enable_thinking"] = false;
    } else {
      context["reasoning_effort"] = *request.reasoning_effort;  // gpt-oss reads it
    }
  }
  if (request.kwargs.is_object()) {
    for (const auto& [name, value] : request.kwargs.items()) {
      check(!is_reserved_variable(name), ErrorKind::kInvalidInput,
            "chat_template_kwargs may not set '{}'", name);
      context[name] = value;
    }
  }

  const Parsed* chosen = &impl_->main;
  if (auto it = impl_->named.find("tool_use"); has_tools && it != impl_->named.end()) {
    chosen = &it->second;
  }
  RenderedPrompt prompt;
  try {
    prompt.text = chosen->tpl.render(context);
  } catch (const Error& e) {
    throw Error(ErrorKind::kInvalidInput, std::string("chat template: ") + e.what());
  }
  prompt.starts_in_reasoning =
      ends_in_open_block(prompt.text, impl_->reasoning_tags.open, impl_->reasoning_tags.close);
  return prompt;
}

ParserConfig ChatTemplate::parser_config(const RenderedPrompt& prompt,
                                         const OrderedJson& tools) const {
  ParserConfig config;
  config.tool_format = impl_->tool_format;
  config.reasoning_tags = impl_->reasoning_tags;
  config.starts_in_reasoning = prompt.starts_in_reasoning;
  config.parse_reasoning = prompt.starts_in_reasoning ||
                           impl_->main.source.find(impl_->reasoning_tags.open) != std::string::npos;
  config.tools = tools;
  return config;
}

std::string ChatTemplate::tool_call_opening(std::string_view name) const {
  return chat::tool_call_opening(impl_->tool_format, name, impl_->mistral_args);
}

ToolCallFormat ChatTemplate::tool_call_format() const { return impl_->tool_format; }
bool ChatTemplate::writes_mistral_args() const { return impl_->mistral_args; }

const std::string& ChatTemplate::source() const { return impl_->main.source; }
const std::string& ChatTemplate::origin() const { return impl_->origin; }
const SpecialTokens& ChatTemplate::special_tokens() const { return impl_->tokens; }
bool ChatTemplate::keeps_content_parts() const { return impl_->keeps_parts; }

}  // namespace strata::text::chat
