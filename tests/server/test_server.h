// What the server tests share: a Server on a free loopback port serving a scripted model with the
// real Qwen3 tokenizer and chat template, request bodies, and a reader for SSE streams.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/json.h"
#include "http_client.h"
#include "reply_model.h"
#include "server/server.h"
#include "test_util.h"

namespace strata::test {

inline std::string qwen3_dir() { return shared_fixture("tokenizers/qwen3"); }

inline const text::Tokenizer& qwen3_tokenizer() {
  static const auto tokenizer = text::Tokenizer::load(qwen3_dir());
  return *tokenizer;
}

// A server on a free port, serving a scripted model, running on its own thread.
class TestServer {
 public:
  // Replays `script_text` (a ReplyModel).
  TestServer(const std::string& script_text, server::ServerOptions options = {},
             ReplyModel::Script script = {}, int64_t context_size = 1024)
      : TestServer(reply_model(script_text, std::move(script)), std::move(options),
                   runtime::EngineOptions{.context_size = context_size}) {}

  // Serves `model` (its vocabulary must be Qwen3's), with Qwen3's chat template or the one in
  // `template_file`.
  TestServer(std::unique_ptr<model::Model> model, server::ServerOptions options,
             runtime::EngineOptions engine_options, const std::string& template_file = "")
      : chat_template_(text::chat::ChatTemplate::load(qwen3_dir(), template_file)) {
    engine_ = std::make_unique<runtime::Engine>(std::move(model), engine_options);
    options.port = 0;
    if (options.model_id.empty()) options.model_id = "qwen3-test";
    server_ = std::make_unique<server::Server>(
        options, server::ServedModel{*engine_, qwen3_tokenizer(), chat_template_});
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->run(); });
  }
  ~TestServer() { shutdown(std::chrono::milliseconds(0)); }

  void shutdown(std::chrono::milliseconds grace) {
    if (!thread_.joinable()) return;
    server_->shutdown(grace);
    thread_.join();
  }

  int port() const { return port_; }
  HttpResult post(const std::string& path, const Json& body,
                  const std::map<std::string, std::string>& headers = {}) {
    return http_request(port_, "POST", path, body.dump(), headers);
  }
  HttpResult get(const std::string& path, const std::map<std::string, std::string>& headers = {}) {
    return http_request(port_, "GET", path, "", headers);
  }
  Json health() { return Json::parse(get("/health").body); }

 private:
  static std::unique_ptr<model::Model> reply_model(const std::string& text,
                                                   ReplyModel::Script script) {
    const text::Tokenizer& tok = qwen3_tokenizer();
    script.tokens = tok.encode(text);
    script.end_id = *tok.token_id("<|im_end|>");
    if (script.endless) script.filler_id = tok.encode(" la").front();
    return std::make_unique<ReplyModel>(tok.vocab_size(), std::move(script));
  }

  text::chat::ChatTemplate chat_template_;
  std::unique_ptr<runtime::Engine> engine_;
  std::unique_ptr<server::Server> server_;
  int port_ = 0;
  std::thread thread_;
};

inline Json chat_body(const std::string& user, Json extra = Json::object()) {
  Json body = {{"model", "qwen3-test"}, {"messages", {{{"role", "user"}, {"content", user}}}}};
  body.update(extra);
  return body;
}

struct Streamed {
  std::vector<Json> chunks;  // parsed "data:" events before [DONE]
  bool done = false;         // ended with data: [DONE]
  std::string content, reasoning;
  Json tool_calls = Json::array();
  std::string finish_reason;
  Json logprobs = Json::array();  // chat: every chunk's logprobs.content entries, in order
  Json strata = nullptr;          // the "strata" extension, from the chunk that has it
};

inline Streamed read_stream(const HttpResult& r) {
  Streamed s;
  for (const std::string& data : sse_data(r.body)) {
    if (data == "[DONE]") {
      s.done = true;
      continue;
    }
    Json chunk = Json::parse(data);
    if (chunk.contains("strata")) s.strata = chunk["strata"];
    if (chunk.contains("choices") && !chunk["choices"].empty()) {
      const Json& choice = chunk["choices"][0];
      const Json& delta = choice.contains("delta") ? choice["delta"] : Json::object();
      if (delta.contains("content")) s.content += delta["content"].get<std::string>();
      if (delta.contains("reasoning_content"))
        s.reasoning += delta["reasoning_content"].get<std::string>();
      if (delta.contains("tool_calls"))
        for (const auto& c : delta["tool_calls"]) s.tool_calls.push_back(c);
      if (choice.contains("text")) s.content += choice["text"].get<std::string>();
      if (!choice["finish_reason"].is_null()) s.finish_reason = choice["finish_reason"];
      const Json& lp = choice["logprobs"];
      if (lp.is_object() && lp.contains("content"))
        for (const auto& e : lp["content"]) s.logprobs.push_back(e);
    }
    s.chunks.push_back(std::move(chunk));
  }
  return s;
}

}  // namespace strata::test
