// The OpenAI- and Anthropic-compatible server: routes, auth, and the path from a request to the
// engine and back.
//   POST /v1/chat/completions, POST /v1/completions (also without /v1), GET /v1/models[/ID],
//   POST /v1/messages, POST /v1/messages/count_tokens (Anthropic),
//   POST /v1/responses, GET and DELETE /v1/responses/ID (OpenAI's Responses),
//   GET /health, GET /metrics, POST /tokenize, POST /detokenize.
// One Engine serves every request through a FIFO GenerationQueue; HTTP threads render, tokenize
// and stream; a client that disconnects has its generation cancelled within one step.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "control/think_control.h"
#include "core/settings.h"
#include "runtime/engine.h"
#include "server/http.h"
#include "text/chat/chat_template.h"
#include "text/tokenizer.h"

namespace strata::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: any free port (bind() returns it)
  std::string api_key;  // empty: no authentication; else Bearer or x-api-key
  // Requests admitted at once (generating + queued); more get 503. Also sizes the HTTP threads.
  size_t max_concurrency = 64;
  // Request sizes (the body limit included), connection caps and deadlines.
  ConnectionPolicy connections;
  std::string model_id;              // the name /v1/models reports and requests may use
  std::vector<std::string> aliases;  // other accepted names
  // Thinking budget, loop detection, escape hints and the retrieval router for chat requests.
  control::ThinkControlConfig think_control = control::ThinkControlConfig::defaults();
  Settings settings;  // the settings the process resolved at start, which /health reports
};

// What is served; everything must outlive the Server.
struct ServedModel {
  runtime::Engine& engine;
  const text::Tokenizer& tokenizer;
  const text::chat::ChatTemplate& chat_template;
};

class Server {
 public:
  Server(ServerOptions options, ServedModel model);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int bind();  // binds and listens; returns the port
  void run();  // serves until shutdown()
  // Stops accepting requests; generations in progress or queued may finish for up to `grace`,
  // then are cancelled (their clients get an error event). run() returns after that.
  void shutdown(std::chrono::milliseconds grace);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::server
