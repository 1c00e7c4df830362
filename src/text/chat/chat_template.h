// A model's chat template: found in the model's files (or given explicitly), rendered the way
// Hugging Face's apply_chat_template renders it, after normalising OpenAI-style messages into the
// shape templates expect. Also says which output parser fits the rendered prompt.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "text/chat/output_parser.h"
#include "text/jinja/template.h"

namespace strata::text::chat {

using OrderedJson = nlohmann::ordered_json;

// The special-token strings a template may print ({{ bos_token }}, {{ eos_token }}, ...), as HF
// passes its special_tokens_map: name -> token text. Absent names stay undefined in the template.
using SpecialTokens = std::map<std::string, std::string>;

// One chat to render. Fields follow the OpenAI request; `kwargs` is chat_template_kwargs.
struct ChatRequest {
  OrderedJson messages = OrderedJson::array();  // [{role, content, tool_calls?, ...}, ...]
  OrderedJson tools = nullptr;                  // OpenAI tools list, or null; [] means none
  bool add_generation_prompt = true;
  OrderedJson kwargs = OrderedJson::object();   // extra template variables (enable_thinking, ...)
  std::optional<std::string> reasoning_effort;  // "none" turns thinking off
};

struct RenderedPrompt {
  std::string text;
  // The prompt ends inside an open reasoning block (its last <think> comes after its last
  // </think>): Qwen3.5 and DeepSeek-R1 templates open it in the generation prompt, so the model's
  // output starts as reasoning.
  bool starts_in_reasoning = false;
};

class ChatTemplate {
 public:
  // Where a template comes from, first found wins:
  //   1. template_file when not empty (a .jinja file, or a .json file holding "chat_template");
  //   2. for a model directory: chat_template.jinja, chat_template.json, tokenizer_config.json's
  //      "chat_template" (a string, or a list of {"name", "template"}), then a .gguf file's
  //      metadata; for a .gguf path: its tokenizer.chat_template (+ .<name> variants);
  //   3. the ChatML fallback (fallback_source()).
  // Special tokens come from tokenizer_config.json (bos/eos/unk/pad/...: string or {"content"}) or
  // from the GGUF vocabulary. Throws strata::Error: kNotFound for a missing path or template_file,
  // kInvalidInput for a malformed file or a template that does not parse.
  // `options`: the Jinja limits and strftime_now's clock (trim/lstrip as HF sets them by default).
  static ChatTemplate load(const std::string& model_path, const std::string& template_file = "",
                           const jinja::Options& options = {});
  // From a template file alone: a .jinja file, or a .json file holding "chat_template".
  static ChatTemplate from_file(const std::string& path, SpecialTokens tokens = {},
                                const jinja::Options& options = {});
  // From template text. `named` holds extra named templates (HF's list form, e.g. "tool_use").
  static ChatTemplate from_source(std::string source, SpecialTokens tokens = {},
                                  std::string origin = "string",
                                  std::map<std::string, std::string> named = {},
                                  const jinja::Options& options = {});
  // ChatML (<|im_start|>role\n...<|im_end|>) with Hermes-style tools, for models that ship none.
  static ChatTemplate fallback(SpecialTokens tokens = {}, const jinja::Options& options = {});
  static const std::string& fallback_source();

  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

  // Normalises the request (normalize_messages, with this template's content-parts rule), builds
  // the context (messages, tools, add_generation_prompt, special tokens, reasoning_effort, then
  // kwargs over them) and renders. With tools and a named "tool_use" template, that one renders
  // (as HF does). Throws strata::Error kInvalidInput for malformed messages and for template
  // errors (raise_exception's message is kept, e.g. "Conversation roles must alternate...").
  // Const and safe to call from many threads.
  RenderedPrompt render(const ChatRequest& request) const;

  // The output-parser settings for a prompt this template rendered: tool-call format and reasoning
  // tags detected from the template text, the request's tools (for argument coercion), and whether
  // the output starts as reasoning.
  ParserConfig parser_config(const RenderedPrompt& prompt, const OrderedJson& tools) const;

  // tool_call_opening() in this template's tool-call format: empty when it has none.
  std::string tool_call_opening(std::string_view name) const;
  // The tool-call format its text implies (detect_tool_call_format), and for kMistral whether it
  // writes the later form, [TOOL_CALLS]NAME[ARGS]{...}.
  ToolCallFormat tool_call_format() const;
  bool writes_mistral_args() const;

  const std::string& source() const;  // the default template's text
  const std::string& origin() const;  // where it came from: a file path, "gguf:<path>", "fallback"
  const SpecialTokens& special_tokens() const;
  // True when the template itself handles a list of text parts as `content` (see
  // normalize_messages); otherwise such lists are flattened to one string before rendering.
  bool keeps_content_parts() const;

 private:
  struct Impl;
  explicit ChatTemplate(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Messages as templates expect them, from OpenAI-style input (a copy; the input is not changed):
// - every message must be an object with a string "role", else kInvalidInput naming its index;
// - `content: null` (or absent) becomes "" (as mlx-lm does), so templates can concatenate it;
// - a list of content parts may hold only {"type": "text", "text": ...} parts (others:
//   kUnsupported, strata is text-only). With keep_content_parts it stays a list; otherwise its
//   texts are joined with "\n" into one string (as llama.cpp and vLLM do for templates that need
//   a string);
// - tool_calls[*].function.arguments given as a JSON string is parsed into an object (templates
//   iterate it with |items); "" becomes {}; text that is not JSON is kInvalidInput;
// - "reasoning" (vLLM's field name) is copied to "reasoning_content" when that is absent.
OrderedJson normalize_messages(const OrderedJson& messages, bool keep_content_parts);

// Whether a rendered prompt ends inside an open reasoning block (last `open` after last `close`).
bool ends_in_open_block(std::string_view prompt, std::string_view open = "<think>",
                        std::string_view close = "</think>");

}  // namespace strata::text::chat
