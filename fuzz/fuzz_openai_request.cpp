// libFuzzer target: any bytes as the body of /v1/chat/completions and /v1/completions. The body
// goes through parse_body and both validators; an accepted chat request is normalised and rendered
// with the fallback template, as the server would. Rejections must be ApiError (a clean 400) or
// strata::Error from the chat layer; a crash, a sanitizer report or any other exception is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "text/chat/chat_template.h"

namespace {

using namespace strata;

const text::chat::ChatTemplate& fallback_template() {
  static const auto t =
      text::chat::ChatTemplate::fallback({{"bos_token", "<s>"}, {"eos_token", "</s>"}});
  return t;
}

void check_chat(const server::OrderedJson& body) {
  server::ChatCompletionRequest r;
  try {
    r = server::parse_chat_request(body);
  } catch (const server::ApiError&) {
    return;
  }
  text::chat::ChatRequest chat;
  chat.messages = r.messages;
  chat.tools = r.tools;
  chat.kwargs = r.chat_template_kwargs;
  chat.reasoning_effort = r.reasoning_effort;
  try {
    const text::chat::RenderedPrompt prompt = fallback_template().render(chat);
    fallback_template().parser_config(prompt, r.tools);
  } catch (const Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  server::OrderedJson body;
  try {
    body = server::parse_body(text);
  } catch (const server::ApiError&) {
    return 0;
  }
  check_chat(body);
  try {
    server::parse_completion_request(body);
  } catch (const server::ApiError&) {
  }
  return 0;
}
