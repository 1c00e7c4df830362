// Server: the routes and what each does. Chat and completion requests are parsed and validated,
// rendered and tokenized on the HTTP thread, checked against the context size, then queued as a
// GenerationStream; the response streams its deltas (SSE) or waits for the whole message, and
// cancels the generation as soon as the client is gone. Anthropic's messages and OpenAI's
// Responses are chat requests in other shapes: parsed into chat form, run through the same
// pipeline (start_chat), answered in their own API's shape.
#include "server/server.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "core/log.h"
#include "server/anthropic_request.h"
#include "server/anthropic_response.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/chat_thinking.h"
#include "server/generation_queue.h"
#include "server/generation_stream.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/request_fields.h"
#include "server/responses_request.h"
#include "server/responses_response.h"
#include "server/responses_store.h"
#include "text/structured/gbnf.h"
#include "text/structured/json_schema.h"
#include "text/structured/regex_grammar.h"
#include "text/structured/tool_call_grammar.h"

namespace strata::server {
namespace {

constexpr std::chrono::milliseconds kPollInterval{
    50};  // how often a waiting stream checks its client
// After the grace period's cancellations, how long their clients have to read the end.
constexpr std::chrono::milliseconds kShutdownMargin{500};
// A streamed Anthropic message sends a ping event after this long without any other.
constexpr std::chrono::seconds kPingInterval{10};

HttpResponse json_response(int status, const OrderedJson& body) {
  HttpResponse r;
  r.status = status;
  r.body = dump(body);
  return r;
}

// /health's view of the prefix cache: lookups, and per tier its entries, bytes, hits and evictions.
OrderedJson prefix_cache_json(const runtime::EngineStats& e) {
  const runtime::PrefixCacheStats& p = e.prefix;
  OrderedJson tiers = OrderedJson::object();
  const int64_t entries[] = {0, p.device_entries, p.host_entries, p.disk_entries};
  const uint64_t bytes[] = {0, 0, p.host_bytes, p.disk_bytes};
  for (const runtime::CacheTier t : {runtime::CacheTier::kDevice, runtime::CacheTier::kHost, runtime::CacheTier::kDisk}) {
    const auto i = static_cast<size_t>(t);
    tiers[runtime::cache_tier_name(t)] = {
        {"entries", entries[i]}, {"bytes", bytes[i]}, {"hits", p.hits[i]}, {"evictions", p.evictions[i]}};
  }
  tiers["disk"]["writes"] = p.disk_writes;
  tiers["disk"]["write_failures"] = p.disk_write_failures;
  tiers["disk"]["reads"] = p.disk_reads;
  tiers["disk"]["read_failures"] = p.disk_read_failures;
  tiers["disk"]["write_seconds"] = p.disk_write_seconds;
  tiers["disk"]["read_seconds"] = p.disk_read_seconds;
  return {{"hits", e.prefix_hits}, {"misses", e.prefix_misses}, {"cached_tokens", e.cached_tokens}, {"tiers", tiers}};
}

// The Anthropic routes (/v1/messages...) answer errors in Anthropic's shape, the rest in OpenAI's.
ErrorFormat error_format(std::string_view path) {
  return path.starts_with("/v1/messages") ? ErrorFormat::kAnthropic : ErrorFormat::kOpenAi;
}

HttpResponse error_response(const ApiError& e, ErrorFormat format = ErrorFormat::kOpenAi) {
  HttpResponse r = json_response(e.status(), e.to_json(format));
  if (e.status() == 401) r.headers["WWW-Authenticate"] = "Bearer";
  if (e.status() == 503) r.headers["Retry-After"] = "1";
  return r;
}

// The errors the HTTP layer answers by itself, in the shape of the API the path belongs to.
HttpResponse library_error(int status, const std::string& why, const std::string& path) {
  const ErrorFormat format = error_format(path);
  switch (status) {
    case 404:
      return error_response(ApiError(404, why, {}, "not_found"), format);
    case 405:
      return error_response(ApiError(405, why, {}, "method_not_allowed"), format);
    case 413:
      return error_response(ApiError(413, why, {}, "request_too_large"), format);
    case 500:
      return error_response(ApiError(500, why, {}, {}, "server_error"), format);
    case 503:
      return error_response(ApiError(503, why, {}, "server_busy", "server_error"), format);
    default:
      break;
  }
  return error_response(ApiError(status, why), format);
}

// The grammar syntax of the tool calls a template writes; nullopt when it writes none.
std::optional<text::structured::ToolCallSyntax> tool_call_syntax(
    const text::chat::ChatTemplate& chat_template) {
  using text::chat::ToolCallFormat;
  using text::structured::ToolCallSyntax;
  switch (chat_template.tool_call_format()) {
    case ToolCallFormat::kHermes:
      return ToolCallSyntax::kHermes;
    case ToolCallFormat::kQwen3Xml:
      return ToolCallSyntax::kQwenXml;
    case ToolCallFormat::kLlama3:
      return ToolCallSyntax::kLlama3;
    case ToolCallFormat::kMistral:
      return chat_template.writes_mistral_args() ? ToolCallSyntax::kMistralArgs
                                                 : ToolCallSyntax::kMistralList;
    case ToolCallFormat::kNone:
      break;
  }
  return std::nullopt;
}

// The special tokens this template's constrained tool calls write (Mistral's [ARGS]).
std::vector<std::string> call_special_tokens(const text::chat::ChatTemplate& chat_template) {
  const auto syntax = tool_call_syntax(chat_template);
  return syntax ? text::structured::tool_call_special_tokens(*syntax) : std::vector<std::string>{};
}

uint64_t random_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace

struct Server::Impl {
  ServerOptions options;
  ServedModel model;
  HttpServer http;
  GenerationQueue queue;
  Metrics metrics;
  ResponseStore responses_store;  // /v1/responses with store: true
  control::ConstraintCache constraints;  // compiled structured-output constraints, by schema
  std::vector<int32_t> eos_ids;
  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  const int64_t created = unix_time_now();

  Impl(ServerOptions o, ServedModel m)
      : options(std::move(o)),
        model(m),
        http(http_options(options)),
        queue(m.engine, options.max_concurrency),
        responses_store(static_cast<size_t>(options.settings.responses_store),
                        static_cast<size_t>(options.settings.responses_store_mib) << 20),
        constraints(m.tokenizer, 32, call_special_tokens(m.chat_template)) {
    eos_ids = model.tokenizer.eos_ids();
    for (int32_t id : model.engine.model().config().eos_token_ids)
      if (std::find(eos_ids.begin(), eos_ids.end(), id) == eos_ids.end()) eos_ids.push_back(id);
    find_message_start();
    add_routes();
  }

  // The token that opens each message in this template's prompts (ChatML's <|im_start|>, Llama 3's
  // <|start_header_id|>): the first token of the generation prompt a one-message chat ends with,
  // when it is a special token. Chat prompts are cut at each (runtime::GenerationRequest::
  // boundaries), so that the prefix cache keeps the state where every message begins.
  std::optional<int32_t> message_start;

  void find_message_start() {
    try {
      text::chat::ChatRequest chat;
      chat.messages = OrderedJson::array({{{"role", "user"}, {"content", "Hi"}}});
      chat.add_generation_prompt = false;
      const std::string without = model.chat_template.render(chat).text;
      chat.add_generation_prompt = true;
      const std::string with = model.chat_template.render(chat).text;
      if (with.size() <= without.size() || with.compare(0, without.size(), without) != 0) return;
      const std::vector<int32_t> ids =
          model.tokenizer.encode(std::string_view(with).substr(without.size()), /*add_special_tokens=*/false);
      if (!ids.empty() && model.tokenizer.is_special(ids.front())) message_start = ids.front();
    } catch (const std::exception& e) {
      log::debug("chat prompts are cut only every prefill chunk: {}", e.what());
    }
  }

  // Where the prompt's messages (after the first) begin; none while the prefix cache is off (the
  // cuts would serve nothing).
  std::vector<int64_t> message_starts(std::span<const int32_t> prompt) const {
    std::vector<int64_t> out;
    if (!message_start || model.engine.options().prefix_cache == 0) return out;
    for (size_t i = 1; i < prompt.size(); ++i)
      if (prompt[i] == *message_start) out.push_back(static_cast<int64_t>(i));
    return out;
  }

  // A prefill that runs in the background: it wants nothing back.
  class BackgroundJob final : public GenerationJob {
   public:
    bool on_token(int32_t) override { return true; }
    void on_finish(const runtime::GenerationResult&) override {}
    void on_error(const std::string& message) override { log::debug("prefill ahead: {}", message); }
  };

  // The next turn prefilled ahead (issue 41): the conversation as the next request will send it
  // (the answer in its history form, then a message after it) is rendered, and its tokens up to
  // that next message's start, and its first token, run as a background request that generates
  // nothing: its prefill leaves the state at every message start in the prefix cache, so the next
  // turn starts from there. It runs only when nothing else waits, and gives way to any request
  // that arrives (runtime::GenerationRequest::background); it is skipped while other requests hold
  // places in the queue.
  void prefill_next_turn(const ChatCompletionRequest& r, const text::chat::ParsedMessage& answer) {
    if (!options.settings.prefill_ahead || !message_start || !r.options.cache_prompt ||
        model.engine.options().prefix_cache == 0)
      return;
    // Only while no other request holds a place (this one gave its place back before its answer
    // went out): under load it would only wait, holding a place a client could use.
    if (queue.stats().admitted > 0) return;
    try {
      text::chat::ChatRequest chat;
      chat.messages = r.messages;
      chat.tools = prompt_tools(r);
      chat.kwargs = r.chat_template_kwargs;
      chat.reasoning_effort = r.reasoning_effort;
      chat.add_generation_prompt = false;
      OrderedJson said = {{"role", "assistant"}, {"content", answer.content}};
      if (!answer.reasoning_content.empty()) said["reasoning_content"] = answer.reasoning_content;
      if (answer.has_tool_calls()) said["tool_calls"] = tool_calls_json(answer.tool_calls, false);
      chat.messages.push_back(std::move(said));
      chat.messages.push_back(answer.has_tool_calls()
                                  ? OrderedJson{{"role", "tool"}, {"tool_call_id", answer.tool_calls.front().id},
                                                {"content", ""}}
                                  : OrderedJson{{"role", "user"}, {"content", ""}});
      const std::vector<int32_t> ids =
          model.tokenizer.encode(model.chat_template.render(chat).text, /*add_special_tokens=*/false);
      const std::vector<int64_t> starts = message_starts(ids);
      if (starts.empty() || starts.back() + 1 >= context_size()) return;
      runtime::GenerationRequest g;
      g.prompt.assign(ids.begin(), ids.begin() + starts.back() + 1);
      g.boundaries = starts;
      g.max_tokens = 0;
      g.background = true;
      auto job = std::make_shared<BackgroundJob>();
      job->request = std::move(g);
      queue.submit(queue.admit(), std::move(job));
    } catch (const std::exception& e) {  // (a full queue, a template that cannot render it)
      log::debug("prefill ahead skipped: {}", e.what());
    }
  }

  static HttpServerOptions http_options(const ServerOptions& o) {
    // Every admitted request may hold a worker for its whole generation; the rest serve
    // tokenization and rejections meanwhile.
    return HttpServerOptions{
        .host = o.host, .port = o.port, .threads = o.max_concurrency + 16, .policy = o.connections};
  }

  int64_t context_size() const { return model.engine.options().context_size; }

  void add_routes() {
    http.set_error_body(library_error);
    if (!options.api_key.empty()) {
      http.set_guard([this](const HttpRequest& r) -> std::optional<HttpResponse> {
        if (r.path == "/health") return std::nullopt;  // for liveness probes
        if (auto e =
                check_api_key(r.header("authorization"), r.header("x-api-key"), options.api_key)) {
          metrics.count_request("(unauthorized)", 401);  // not the path: clients choose it
          return error_response(*e, error_format(r.path));
        }
        return std::nullopt;
      });
    }
    for (const char* prefix : {"/v1", ""}) {
      const std::string p = prefix;
      add("POST", p + "/chat/completions", [this](const HttpRequest& r) { return chat(r); });
      add("POST", p + "/completions", [this](const HttpRequest& r) { return completion(r); });
      add(
          "GET", p + "/models", [this](const HttpRequest&) { return models(); }, kInline);
      add(
          "GET", p + "/models/*", [this](const HttpRequest& r) { return model_by_id(r); }, kInline);
    }
    // Anthropic's Messages API (its error shape: error_format).
    add("POST", "/v1/messages", [this](const HttpRequest& r) { return messages(r); });
    add("POST", "/v1/messages/count_tokens",
        [this](const HttpRequest& r) { return count_tokens(r); });
    // OpenAI's Responses API, and its store of recent responses.
    add("POST", "/v1/responses", [this](const HttpRequest& r) { return responses(r); });
    add("GET", "/v1/responses/*", [this](const HttpRequest& r) { return stored_response(r); });
    add("DELETE", "/v1/responses/*", [this](const HttpRequest& r) { return delete_response(r); });
    // Answered on the event loop: a probe gets its answer even while every worker is busy.
    add(
        "GET", "/health", [this](const HttpRequest&) { return health(); }, kInline);
    add(
        "GET", "/metrics", [this](const HttpRequest&) { return prometheus(); }, kInline);
    add("POST", "/tokenize", [this](const HttpRequest& r) { return tokenize(r); });
    add("POST", "/detokenize", [this](const HttpRequest& r) { return detokenize(r); });
  }

  static constexpr bool kInline = true;

  // Registers a route whose ApiErrors (and errors from the layers below) become errors in its
  // API's shape.
  void add(const char* method, const std::string& path,
           std::function<HttpResponse(const HttpRequest&)> handler, bool inline_handler = false) {
    http.route(
        method, path,
        [this, path, format = error_format(path),
         handler = std::move(handler)](const HttpRequest& r) {
          HttpResponse response;
          try {
            response = handler(r);
          } catch (const ApiError& e) {
            response = error_response(e, format);
          } catch (const Error& e) {
            response = error_response(api_error_from(e), format);
          } catch (const std::exception& e) {
            log::error("{} {}: {}", r.method, r.path, e.what());
            response = error_response(ApiError(500, e.what(), {}, {}, "server_error"), format);
          }
          metrics.count_request(path, response.status);
          return response;
        },
        inline_handler);
  }

  // A name this server serves, or any name with the any_model setting: 404 otherwise. Responses
  // name the served model either way.
  void check_model(const std::string& name) const {
    if (name.empty() || name == options.model_id || options.settings.any_model) return;
    for (const auto& alias : options.aliases)
      if (name == alias) return;
    throw ApiError(404,
                   fmt::format("The model '{}' does not exist. This server serves '{}' (with "
                               "--any-model it serves requests for any model name).",
                               name, options.model_id),
                   "model", "model_not_found");
  }

  OrderedJson model_json() const {
    return {{"id", options.model_id},
            {"object", "model"},
            {"created", created},
            {"owned_by", "strata"},
            {"max_model_len", context_size()}};
  }

  HttpResponse models() const {
    return json_response(200, {{"object", "list"}, {"data", OrderedJson::array({model_json()})}});
  }

  HttpResponse model_by_id(const HttpRequest& r) const {
    check_model(r.path.substr(r.path.find("/models/") + 8));
    return json_response(200, model_json());
  }

  static double per_step(uint64_t total, uint64_t steps) {
    return steps == 0 ? 0.0 : static_cast<double>(total) / static_cast<double>(steps);
  }

  HttpResponse health() const {
    const QueueStats q = queue.stats();
    const HttpServer::Stats h = http.stats();
    const model::ModelInfo info = model.engine.model().info();
    const ProcessMemory mem = process_memory();
    const Metrics::Snapshot m = metrics.snapshot();
    const double uptime =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return json_response(
        200,
        {{"status", "ok"},
         {"model", options.model_id},
         {"context_size", context_size()},
         {"uptime_seconds", uptime},
         {"memory",
          {{"weights_bytes", info.weight_bytes},
           {"state_bytes_per_token", info.state_bytes_per_token},
           {"kv_cache_type", model::kv_cache_type_name(info.kv_cache_dtype)},
           {"resident_bytes", mem.resident_bytes}}},
         {"requests",
          {{"waiting", q.engine.waiting},
           {"running", q.engine.running},
           {"finished", q.engine.finished},
           {"cancelled", q.engine.cancelled},
           {"failed", q.engine.failed}}},
         {"tokens", {{"prompt", q.engine.prompt_tokens}, {"generated", q.engine.generated_tokens}}},
         {"engine",
          {{"parallel", q.engine.slots},
           {"slots_free", q.engine.slots_free},
           {"state_bytes", model.engine.state_bytes()},
           {"kv_block_tokens", model.engine.options().kv_block_tokens},
           {"kv_blocks", q.engine.kv_blocks},
           {"kv_blocks_free", q.engine.kv_blocks_free},
           {"swapped", q.engine.swapped},
           {"preemptions", q.engine.preemptions},
           {"resumptions", q.engine.resumptions},
           {"prefix_cache", prefix_cache_json(q.engine)},
           {"steps", q.engine.steps},
           {"tokens_per_step", per_step(q.engine.step_tokens, q.engine.steps)},
           {"requests_per_step", per_step(q.engine.step_requests, q.engine.steps)},
           {"decode_tokens_per_forward",
            per_step(q.engine.decode_tokens, q.engine.decode_forwards)}}},
         {"connections",
          {{"open", h.connections},
           {"accepted", h.accepted},
           {"refused", h.refused},
           {"evicted", h.evicted},
           {"timed_out", h.timed_out},
           {"rejected_requests", h.rejected_requests}}},
         {"think_control",
          {{"budget_closes", m.think_budget_closes},
           {"loop_escapes", m.think_loop_escapes},
           {"answer_loop_stops", m.answer_loop_stops},
           {"router_activations", m.think_router_activations}}},
         {"settings", options.settings.to_json()}});
  }

  HttpResponse prometheus() const {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    const double uptime =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    r.body = prometheus_text(metrics.snapshot(), queue.stats(), http.stats(), options.model_id,
                             uptime, model.engine.model().info().weight_bytes);
    return r;
  }

  HttpResponse tokenize(const HttpRequest& r) const {
    const OrderedJson body = parse_body(r.body);
    std::string text;
    bool add_special = false;
    if (body.contains("messages")) {
      // A chat, rendered as /v1/chat/completions would render it.
      const ChatCompletionRequest chat_request = parse_chat_request(body);
      text = render(chat_request).text;
    } else {
      const char* key = body.contains("content") ? "content" : "prompt";
      auto it = body.find(key);
      if (it == body.end() || !it->is_string())
        bad_request("content", "Expected 'content' (or 'prompt') as a string, or 'messages'.");
      text = it->get<std::string>();
      for (const char* flag : {"add_special", "add_special_tokens"}) {
        auto f = body.find(flag);
        if (f == body.end() || f->is_null()) continue;
        if (!f->is_boolean()) bad_request(flag, fmt::format("'{}' must be a boolean.", flag));
        add_special = f->get<bool>();
      }
    }
    const std::vector<int32_t> ids = model.tokenizer.encode(text, add_special);
    OrderedJson out = {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", context_size()}};
    if (auto p = body.find("with_pieces"); p != body.end() && p->is_boolean() && p->get<bool>()) {
      OrderedJson pieces = OrderedJson::array();
      for (int32_t id : ids)
        pieces.push_back(model.tokenizer.decode(std::span<const int32_t>(&id, 1)));
      out["pieces"] = std::move(pieces);
    }
    return json_response(200, out);
  }

  HttpResponse detokenize(const HttpRequest& r) const {
    const OrderedJson body = parse_body(r.body);
    auto it = body.find("tokens");
    if (it == body.end() || !it->is_array())
      bad_request("tokens", "Expected 'tokens': an array of token ids.");
    std::vector<int32_t> ids;
    const int64_t vocab = model.tokenizer.vocab_size();
    for (size_t i = 0; i < it->size(); ++i) {
      const OrderedJson& id = (*it)[i];
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab)
        bad_request(fmt::format("tokens[{}]", i),
                    fmt::format("Expected a token id between 0 and {}.", vocab - 1));
      ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    const std::string text = model.tokenizer.decode(ids);
    return json_response(200, {{"content", text}});
  }

  // The tools the prompt shows: none for tool_choice "none", only the named one when named.
  static OrderedJson prompt_tools(const ChatCompletionRequest& r) {
    if (r.tools.is_null() || r.tool_choice == ToolChoice::kNone) return nullptr;
    if (r.tool_choice != ToolChoice::kNamed) return r.tools;
    OrderedJson named = OrderedJson::array();
    for (const auto& tool : r.tools)
      if (tool["function"]["name"] == r.tool_choice_name) named.push_back(tool);
    return named;
  }

  // tool_choice "required" or a named function: the text the answer must open with (a call, or a
  // call to that function); nullopt for "auto" and "none". A template with no tool-call format
  // cannot honour either: a 400.
  std::optional<std::string> forced_call_opening(const ChatCompletionRequest& r) const {
    if (r.tool_choice != ToolChoice::kRequired && r.tool_choice != ToolChoice::kNamed)
      return std::nullopt;
    std::string text = model.chat_template.tool_call_opening(
        r.tool_choice == ToolChoice::kNamed ? r.tool_choice_name : "");
    if (text.empty())
      bad_request(
          "tool_choice",
          "This model's chat template has no tool-call format, so tool_choice 'required' or a "
          "named function cannot be honoured; use 'auto' or 'none'.",
          "invalid_value");
    return text;
  }

  // The controller settings that force `opening` at the start of the answer (after any reasoning).
  control::OpeningSettings opening_settings(const std::string& opening,
                                            const text::chat::ParserConfig& parser) const {
    const text::Tokenizer& tokenizer = model.tokenizer;
    control::OpeningSettings s;
    s.opening = tokenizer.encode(opening);
    s.blank = [&tokenizer](int32_t id) {
      const std::string piece = tokenizer.decode(std::span<const int32_t>(&id, 1));
      return !piece.empty() && piece.find_first_not_of(" \t\r\n") == std::string::npos;
    };
    s.starts_in_reasoning = parser.starts_in_reasoning;
    if (parser.parse_reasoning) {
      s.think_open = tokenizer.token_id(parser.reasoning_tags.open).value_or(-1);
      s.think_close = tokenizer.token_id(parser.reasoning_tags.close).value_or(-1);
    }
    return s;
  }

  // The constraint of an answer's shape (response_format, json_schema, grammar, strata_grammar),
  // compiled against this model's vocabulary (cached by the schema's or grammar's text); null
  // when the answer is free. A schema or grammar that cannot be compiled is a 400 naming the
  // field it came in.
  std::shared_ptr<text::structured::TokenConstraint> answer_constraint(const ResponseFormat& f) {
    namespace st = text::structured;
    const std::string param = !f.param.empty() ? f.param : "response_format";
    try {
      if (f.type == "json_object")
        return constraints.get("json_object", [] { return st::any_json_object(); });
      if (f.type == "json_schema")
        return constraints.get("json_schema " + f.schema.dump(),
                               [&] { return st::compile_json_schema(f.schema); });
      if (f.type == "regex")
        return constraints.get("regex " + f.pattern, [&] {
          st::Grammar g;
          g.set_root(st::compile_regex(g, f.pattern, st::RegexMode::kRaw));
          return g;
        });
      if (f.type == "gbnf")
        return constraints.get("gbnf " + f.grammar, [&] { return st::compile_gbnf(f.grammar); });
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kInvalidInput && e.kind() != ErrorKind::kUnsupported) throw;
      if (f.type == "regex" || f.type == "gbnf")
        bad_request(param, fmt::format("Invalid grammar in '{}': {}.", param, e.what()),
                    "invalid_grammar");
      bad_request(param,
                  f.name.empty()
                      ? fmt::format("Invalid schema in '{}': {}.", param, e.what())
                      : fmt::format("Invalid schema for {} '{}': {}.", param, f.name, e.what()),
                  "invalid_json_schema");
    }
    return nullptr;
  }

  // The structured output a chat asks for: the answer's shape (answer_constraint), or, with tools
  // offered and a template whose calls strata can constrain, the shape of each tool call (cached
  // by the tools; never a 400: a tool whose schema cannot be compiled gets free arguments).
  // nullopt: none.
  std::optional<control::ConstraintSettings> output_constraint(
      const ChatCompletionRequest& r, const OrderedJson& tools,
      const text::chat::ParserConfig& parser, const std::vector<int32_t>& end_ids) {
    namespace st = text::structured;
    control::ConstraintSettings s;
    s.answer = answer_constraint(r.response_format);
    using text::chat::ToolCallFormat;
    const std::optional<st::ToolCallSyntax> syntax = tool_call_syntax(model.chat_template);
    if (!s.answer && !tools.is_null() && parser.tool_format != ToolCallFormat::kNone && syntax) {
      st::ToolCallOptions call_options;
      call_options.single_call = !r.parallel_tool_calls;
      try {
        s.tool_call =
            constraints.get(fmt::format("tools {} {} {}", static_cast<int>(*syntax),
                                        call_options.single_call, tools.dump()),
                            [&] { return st::tool_call_grammar(tools, *syntax, call_options); });
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kInvalidInput && e.kind() != ErrorKind::kUnsupported) throw;
        // Schemas that cannot be compiled only free their tools' arguments; this is a syntax no
        // tool's name can be written in (Mistral's NAME[ARGS] and a name such as "read file").
        log::warn("tool calls left unconstrained: {}", e.what());
      }
      s.call_open = std::string(text::chat::tool_call_tag(parser.tool_format));
      s.call_open_id = model.tokenizer.token_id(s.call_open).value_or(-1);
      s.single_call = !r.parallel_tool_calls;
      if (parser.tool_format == ToolCallFormat::kLlama3) {  // calls also written as bare JSON
        s.bare_call = text::chat::opens_llama3_call;
        s.call_separators = text::chat::kLlama3CallSeparators;
      }
    }
    if (!s.answer && !s.tool_call) return std::nullopt;
    s.end_ids = end_ids;
    s.starts_in_reasoning = parser.parse_reasoning && parser.starts_in_reasoning;
    s.think_close = model.tokenizer.token_id(parser.reasoning_tags.close).value_or(-1);
    return s;
  }

  text::chat::RenderedPrompt render(const ChatCompletionRequest& r) const {
    text::chat::ChatRequest chat;
    chat.messages = r.messages;
    chat.tools = prompt_tools(r);
    chat.kwargs = r.chat_template_kwargs;
    chat.reasoning_effort = r.reasoning_effort;
    try {
      return model.chat_template.render(chat);
    } catch (const Error& e) {
      ApiError api = api_error_from(e);
      throw ApiError(api.status(),
                     fmt::format("The chat template could not render these messages: {}", e.what()),
                     "messages", api.code(), api.type());
    }
  }

  // The engine request for a prompt: context check, max_tokens, sampling, end-of-generation ids.
  runtime::GenerationRequest generation_request(const GenerationOptions& o,
                                                std::vector<int32_t> prompt,
                                                const char* prompt_name,
                                                int64_t default_max_tokens) const {
    const int64_t ctx = context_size();
    const int64_t n = static_cast<int64_t>(prompt.size());
    if (n >= ctx)
      throw ApiError(
          400,
          fmt::format(
              "This model's maximum context length is {} tokens. However, your {} resulted in {} "
              "tokens. Please reduce the length of the {}.",
              ctx, prompt_name, n, prompt_name),
          prompt_name, "context_length_exceeded");
    if (o.max_tokens && n + *o.max_tokens > ctx)
      throw ApiError(
          400,
          fmt::format(
              "This model's maximum context length is {} tokens. However, you requested {} tokens "
              "({} in the {}, {} in the completion). Please reduce the length of the {} or "
              "completion.",
              ctx, n + *o.max_tokens, n, prompt_name, *o.max_tokens, prompt_name),
          "max_tokens", "context_length_exceeded");
    const int64_t vocab = model.engine.model().config().vocab_size;
    for (const auto& [id, bias] : o.sampling.logit_bias)
      if (id >= vocab)
        bad_request("logit_bias",
                    fmt::format("Token id {} is outside the vocabulary (size {}).", id, vocab));
    if (o.speculative.method == runtime::SpeculativeParams::Method::kDraft && !model.engine.options().draft_model)
      bad_request("strata.speculative", "This server has no draft model (strata serve --draft-model).");
    if (const int64_t layers = model.engine.model().config().num_layers;
        o.speculative.layers > 0 && o.speculative.layers >= layers)
      invalid_value("strata.speculative.layers",
                    fmt::format("self-speculation drafts with fewer than the model's {} layers, "
                                "got {}.",
                                layers, o.speculative.layers));
    runtime::GenerationRequest g;
    g.prompt = std::move(prompt);
    g.max_tokens = o.max_tokens.value_or(std::min(default_max_tokens, ctx - n));
    g.sampling = o.sampling;
    if (!o.seed) g.sampling.seed = random_seed();
    if (!o.ignore_eos) g.stop_ids = eos_ids;
    g.prefix_cache = o.cache_prompt;
    g.speculative = o.speculative;
    return g;
  }

  std::shared_ptr<GenerationStream> submit(Admission admission, runtime::GenerationRequest g,
                                           const GenerationOptions& o, StreamSettings settings) {
    settings.stops = o.stop;
    settings.top_logprobs = o.logprobs;
    auto job =
        std::make_shared<GenerationStream>(model.tokenizer, std::move(g), std::move(settings));
    queue.submit(std::move(admission), job);
    return job;
  }

  using Jobs = std::vector<std::shared_ptr<GenerationStream>>;

  // The places of a request's n choices: 503 unless all are free.
  std::vector<Admission> admit_choices(int n) {
    std::vector<Admission> places;
    for (int i = 0; i < n; ++i) places.push_back(queue.admit());
    return places;
  }

  // Choice i's seed: the request's own for the first; seed + i when the request set one (so n
  // choices are reproducible), else a fresh random one.
  static uint64_t choice_seed(const GenerationOptions& o, const runtime::GenerationRequest& g,
                              int i) {
    if (i == 0) return g.sampling.seed;
    return o.seed ? g.sampling.seed + static_cast<uint64_t>(i) : random_seed();
  }

  static void cancel_all(const Jobs& jobs) {
    for (const auto& job : jobs) job->cancel();
  }

  // One response of every choice's: choice i's object as the single-choice builder makes it, its
  // choice given index i, their usage summed (the prompt counted once).
  template <typename One>
  OrderedJson merged_choices(const Jobs& jobs, One one) const {
    OrderedJson j = one(0);
    for (size_t i = 1; i < jobs.size(); ++i) {
      OrderedJson choice = one(i)["choices"][0];
      choice["index"] = i;
      j["choices"].push_back(std::move(choice));
    }
    if (jobs.size() > 1) j["usage"] = usage_json(usage_of(jobs));
    return j;
  }

  // A streamed answer of every choice: open(i) for each choice first (false: the client is gone),
  // then each delta of choice i through send(i, delta) (false: likewise); at the end an engine
  // error as an error event, else finish(i, reason) for each choice and, with usage_object, the
  // usage chunk; then [DONE].
  template <typename Open, typename Send, typename Finish>
  void stream_choices(BodyWriter& out, const Jobs& jobs, Open open, Send send, Finish finish,
                      const ResponseHeader& header, const char* usage_object) {
    for (size_t i = 0; i < jobs.size(); ++i)
      if (!open(i)) {
        cancel_all(jobs);
        return;
      }
    std::vector<StreamUpdate> ends;
    const bool completed = follow_all(
        jobs, [&out] { return out.connected(); }, ends,
        [&](size_t i, const StreamUpdate& update) {
          for (const StreamDelta& d : update.deltas)
            if (!send(i, d)) return false;
          return true;
        });
    if (!completed) return;
    for (const auto& job : jobs) observe(*job);
    for (const StreamUpdate& u : ends)
      if (auto e = failure(u)) {
        out.write(sse_event(e->to_json()));
        out.write(kSseDone);
        return;
      }
    for (size_t i = 0; i < ends.size(); ++i) finish(i, ends[i].finish_reason);
    if (usage_object != nullptr)
      out.write(sse_event(usage_chunk_json(header, usage_object, usage_of(jobs))));
    out.write(kSseDone);
  }

  // A token's text in log-probabilities: the decode of that one id.
  TokenText token_text(bool skip_special_tokens) const {
    return [this, skip_special_tokens](int32_t id) {
      return model.tokenizer.decode(std::span<const int32_t>(&id, 1), skip_special_tokens);
    };
  }

  Usage usage_of(const GenerationStream& job) const {
    Usage u;
    u.prompt_tokens = static_cast<int64_t>(job.request.prompt.size());
    u.cached_tokens = job.cached_tokens();
    u.completion_tokens = job.completion_tokens();
    const std::string& reasoning = job.message().reasoning_content;
    if (const std::optional<control::ThinkReport> think = job.think_report())
      u.reasoning_tokens = think->reasoning_tokens;
    else if (!reasoning.empty())
      u.reasoning_tokens = static_cast<int64_t>(model.tokenizer.encode(reasoning).size());
    return u;
  }

  Usage usage_of(const Jobs& jobs) const {
    Usage total = usage_of(*jobs.front());
    for (size_t i = 1; i < jobs.size(); ++i) {
      const Usage u = usage_of(*jobs[i]);
      total.completion_tokens += u.completion_tokens;
      total.reasoning_tokens += u.reasoning_tokens;
    }
    return total;
  }

  // Waits for the end of every job (choice) of a response, handing each update to on_update with
  // its choice's index, and checking that the client is still there; false (and every job
  // cancelled) once it is not, or once on_update says so. ends: each job's last update.
  bool follow_all(const Jobs& jobs, const std::function<bool()>& client_connected,
                  std::vector<StreamUpdate>& ends,
                  const std::function<bool(size_t, const StreamUpdate&)>& on_update) {
    ends.assign(jobs.size(), {});
    if (jobs.size() == 1)
      return follow(*jobs.front(), client_connected, ends.front(),
                    [&](const StreamUpdate& u) { return on_update(0, u); });
    // Several: each job's wait is short, so that every choice's deltas flow.
    constexpr std::chrono::milliseconds kSlice{5};
    std::vector<bool> done(jobs.size(), false);
    size_t left = jobs.size();
    auto last_check = std::chrono::steady_clock::now();
    while (left > 0) {
      for (size_t i = 0; i < jobs.size(); ++i) {
        if (done[i]) continue;
        StreamUpdate update = jobs[i]->wait(kSlice);
        bool ok = on_update(i, update);
        const auto now = std::chrono::steady_clock::now();
        if (ok && now - last_check >= kPollInterval) {
          ok = client_connected();
          last_check = now;
        }
        if (!ok) {
          cancel_all(jobs);
          return false;
        }
        if (update.done) {
          ends[i] = std::move(update);
          done[i] = true;
          --left;
        }
      }
    }
    return true;
  }

  // Waits for the job's end while checking that its client is still there; false (and the job
  // cancelled) once it is not. Streams each update through `on_update` first.
  bool follow(GenerationStream& job, const std::function<bool()>& client_connected,
              StreamUpdate& update, const std::function<bool(const StreamUpdate&)>& on_update) {
    auto last_check = std::chrono::steady_clock::now();
    for (;;) {
      update = job.wait(kPollInterval);
      bool ok = on_update(update);
      const auto now = std::chrono::steady_clock::now();
      if (ok && !update.done && now - last_check >= kPollInterval) {
        ok = client_connected();  // also while deltas arrive
        last_check = now;
      }
      if (!ok) {
        job.cancel();
        return false;
      }
      if (update.done) return true;
    }
  }

  // The end of a generation that did not complete: an engine error (a 400 when the request was at
  // fault, such as its output constraint going over the work budget mid-answer, else a 500) or a
  // cancel at shutdown.
  static std::optional<ApiError> failure(const StreamUpdate& u) {
    if (!u.error.empty()) return api_error_from(Error(u.error_kind, "Generation failed: " + u.error));
    if (u.finish_reason == "cancelled")
      return ApiError(503, "The server is shutting down; the generation was cancelled.", {},
                      "server_shutting_down", "server_error");
    return std::nullopt;
  }

  void observe(const GenerationStream& job) {
    metrics.observe_generation(job.seconds_to_first_token(),
                               job.prefill_seconds() + job.decode_seconds());
    if (const std::optional<control::ThinkReport> think = job.think_report()) {
      const control::ThinkReport& r = *think;
      metrics.count_think_control(r.budget_closed, r.loop_escaped, r.answer_loop_stopped);
      if (r.budget_closed || r.loop_escaped || r.answer_loop_stopped)
        log::info(
            "think control: budget closed {}, loop escaped {} (period {}), answer loop "
            "stopped {}; {} reasoning and {} answer tokens",
            r.budget_closed, r.loop_escaped, r.loop.period, r.answer_loop_stopped,
            r.reasoning_tokens, r.answer_tokens);
    }
  }

  // A chat request on its way: each choice's generation, whether the router turned thinking on,
  // and, for one choice, the next turn's prefill to queue once the answer is given.
  struct ChatRun {
    Jobs jobs;
    bool routed = false;
    std::function<void()> ahead;
  };

  // The pipeline of every chat request, whichever API it came in (chat completions, Anthropic
  // messages): a place in the queue for each choice, taken before rendering (a refusal costs
  // nothing more), the think router, rendering and tokenizing, think control and a forced
  // tool-call opening, and the jobs queued. make_call_id: the tool-call ids (empty: the parser's
  // "call_...").
  ChatRun start_chat(ChatCompletionRequest r, std::function<std::string()> make_call_id = {}) {
    std::vector<Admission> admissions = admit_choices(r.options.n);
    const control::ThinkControlConfig& think_config = options.think_control;
    const control::TaskSignals task = task_signals(r);
    const bool routed =
        control::route_thinking_on(think_config.router, task, thinking_set_by_request(r));
    if (routed) {
      r.chat_template_kwargs["enable_thinking"] = true;
      metrics.count_router_activation();
      log::info(
          "think router: thinking on for a {}-character question over a {}-character "
          "system prompt",
          task.last_user_message.size(), task.system_prompt.size());
    }
    const std::optional<std::string> opening = forced_call_opening(r);
    const text::chat::RenderedPrompt rendered = render(r);
    std::vector<int32_t> prompt =
        model.tokenizer.encode(rendered.text, /*add_special_tokens=*/false);
    if (prompt.empty()) bad_request("messages", "The messages rendered to an empty prompt.");
    const int64_t room = context_size() - static_cast<int64_t>(prompt.size());
    // A cap on all output is a cap, not a demand: agents ask for more than a local context holds.
    if (r.max_tokens_caps_all_output && r.options.max_tokens && room > 0)
      r.options.max_tokens = std::min(*r.options.max_tokens, room);
    const OrderedJson tools = prompt_tools(r);
    runtime::GenerationRequest g = generation_request(r.options, std::move(prompt), "messages", INT64_MAX);
    g.boundaries = message_starts(g.prompt);
    Jobs jobs;
    for (int i = 0; i < r.options.n; ++i) {  // each choice its own sequence, policies and seed
      StreamSettings settings;
      settings.parser = model.chat_template.parser_config(rendered, tools);
      if (tools.is_null()) settings.parser->tool_format = text::chat::ToolCallFormat::kNone;
      if (!r.parallel_tool_calls) settings.parser->max_tool_calls = 1;  // and generation ends at it
      if (make_call_id) settings.parser->make_call_id = make_call_id;
      runtime::GenerationRequest choice = g;
      choice.sampling.seed = choice_seed(r.options, g, i);
      // With think control, max_tokens counts only answer tokens; thinking has its own budget.
      // ignore_eos asks for exactly max_tokens tokens (benchmarks): nothing may end them early.
      if (!r.options.ignore_eos)
        settings.think = make_think_controller(
            think_config, model.tokenizer, rendered, task,
            r.max_thinking_tokens.value_or(think_config.max_thinking_tokens), choice.max_tokens);
      if (settings.think) choice.max_tokens = std::min(settings.think->engine_max_tokens(), room);
      if (r.max_tokens_caps_all_output)
        choice.max_tokens = std::min(choice.max_tokens, g.max_tokens);
      if (opening) settings.opening = opening_settings(*opening, *settings.parser);
      settings.constraint = output_constraint(r, tools, *settings.parser, choice.stop_ids);
      jobs.push_back(submit(std::move(admissions[static_cast<size_t>(i)]), std::move(choice),
                            r.options, std::move(settings)));
    }
    ChatRun run{jobs, routed, {}};
    // One answer: its conversation's next turn is prefilled once it is given.
    if (r.options.n == 1)
      run.ahead = [this, jobs,
                   request = std::make_shared<const ChatCompletionRequest>(std::move(r))] {
        prefill_next_turn(*request, jobs.front()->message());
      };
    return run;
  }

  HttpResponse chat(const HttpRequest& http_request) {
    ChatCompletionRequest r = parse_chat_request(parse_body(http_request.body));
    check_model(r.options.model);
    const bool stream = r.options.stream, include_usage = r.options.include_usage;
    ChatRun run = start_chat(std::move(r));
    const ResponseHeader header{new_response_id("chatcmpl-"), unix_time_now(), options.model_id};
    return stream ? stream_chat(run.jobs, header, include_usage, run.routed, std::move(run.ahead))
                  : whole_chat(http_request, run.jobs, header, run.routed, std::move(run.ahead));
  }

  // POST /v1/messages: the Anthropic request in chat form through the chat pipeline; the answer
  // as an Anthropic message, whole or streamed.
  HttpResponse messages(const HttpRequest& http_request) {
    ChatCompletionRequest r = parse_messages_request(parse_body(http_request.body));
    check_model(r.options.model);
    const bool stream = r.options.stream;
    ChatRun run = start_chat(std::move(r), [] { return new_response_id("toolu_"); });
    const ResponseHeader header{new_response_id("msg_"), unix_time_now(), options.model_id};
    return stream ? stream_message(std::move(run), header)
                  : whole_message(http_request, std::move(run), header);
  }

  // POST /v1/messages/count_tokens: the tokens of the prompt /v1/messages would render.
  HttpResponse count_tokens(const HttpRequest& http_request) const {
    const ChatCompletionRequest r =
        parse_messages_request(parse_body(http_request.body), MessagesRoute::kCountTokens);
    check_model(r.options.model);
    const std::vector<int32_t> ids =
        model.tokenizer.encode(render(r).text, /*add_special_tokens=*/false);
    return json_response(200, {{"input_tokens", ids.size()}});
  }

  HttpResponse whole_message(const HttpRequest& http_request, ChatRun run, ResponseHeader header) {
    return whole_one(http_request, std::move(run),
                     [this, header](const GenerationStream& job, const std::string& finish) {
                       return anthropic_message_json(header, job.message(), finish,
                                                     job.stop_sequence(), usage_of(job));
                     });
  }

  // The whole (not streamed) answer of a run of one choice in another API's shape: body(job,
  // finish reason) builds the object, which gets the strata extension, then goes to kept (when
  // given) and to the client; the next turn's prefill starts where the answer ended as asked.
  template <typename Body>
  HttpResponse whole_one(const HttpRequest& http_request, ChatRun run, Body body,
                         std::function<void(const OrderedJson&)> kept = {}) {
    return whole(http_request, run.jobs,
                 [this, run, body, kept](const std::vector<StreamUpdate>& ends) {
                   const GenerationStream& job = *run.jobs.front();
                   const std::string& finish = ends.front().finish_reason;
                   if (run.ahead && completed_normally(finish)) run.ahead();
                   OrderedJson j = body(job, finish);
                   if (auto extension = chat_extension(job, run.routed))
                     j["strata"] = std::move(*extension);
                   if (kept) kept(j);
                   return j;
                 });
  }

  // What an API writes around a streamed answer's deltas; "" writes nothing.
  struct StreamShape {
    std::function<std::string()> start;
    std::function<std::string(const text::chat::ParsedDelta&)> delta;
    std::function<std::string()> ping;  // when nothing was sent for kPingInterval
    std::function<std::string(const ApiError&)> fail;
    // The last events, given the finish reason and the strata extension (or null).
    std::function<std::string(const std::string&, const OrderedJson&)> finish;
  };

  // A run of one choice streamed in another API's shape (make_shape(job) gives it, when the stream
  // starts): start, each delta's events (and pings), then finish, or fail on an engine error; the
  // next turn's prefill starts where the answer ended as asked.
  HttpResponse stream_one(ChatRun run,
                          std::function<StreamShape(const GenerationStream&)> make_shape) {
    HttpResponse response;
    response.content_type = "text/event-stream";
    response.headers["Cache-Control"] = "no-cache";
    response.stream = [this, run, make_shape](BodyWriter& out) {
      GenerationStream& job = *run.jobs.front();
      const StreamShape shape = make_shape(job);
      auto last_write = std::chrono::steady_clock::now();
      auto write = [&](const std::string& text) {
        if (text.empty()) return true;
        last_write = std::chrono::steady_clock::now();
        return out.write(text);
      };
      if (!write(shape.start())) {
        job.cancel();
        return;
      }
      StreamUpdate end;
      const bool completed = follow(
          job, [&out] { return out.connected(); }, end,
          [&](const StreamUpdate& update) {
            for (const StreamDelta& d : update.deltas)
              if (!write(shape.delta(d.text))) return false;
            if (std::chrono::steady_clock::now() - last_write >= kPingInterval)
              return write(shape.ping());
            return true;
          });
      if (!completed) return;
      observe(job);
      if (auto e = failure(end)) {
        write(shape.fail(*e));
        return;
      }
      const std::optional<OrderedJson> extension = chat_extension(job, run.routed);
      write(shape.finish(end.finish_reason, extension.value_or(OrderedJson(nullptr))));
      if (run.ahead && completed_normally(end.finish_reason)) run.ahead();
    };
    return response;
  }

  // Anthropic's stream: message_start and a ping, each delta's block events (and a ping whenever
  // nothing was sent for kPingInterval, e.g. during a long prefill), then message_delta and
  // message_stop, or an error event.
  HttpResponse stream_message(ChatRun run, ResponseHeader header) {
    return stream_one(std::move(run), [this, header](const GenerationStream& job) {
      auto events = std::make_shared<AnthropicStream>(header);
      return StreamShape{
          [events, &job] { return events->start(static_cast<int64_t>(job.request.prompt.size())); },
          [events](const text::chat::ParsedDelta& d) { return events->delta(d); },
          [] { return AnthropicStream::ping(); },
          [](const ApiError& e) { return AnthropicStream::error(e); },
          [this, events, &job](const std::string& finish, const OrderedJson& extension) {
            return events->finish(finish, job.stop_sequence(), usage_of(job), extension);
          }};
    });
  }

  // POST /v1/responses: the Responses request in chat form (previous_response_id's conversation
  // first, from the store) through the chat pipeline; the answer as a response object, whole or
  // as Responses events, kept in the store unless store is false.
  HttpResponse responses(const HttpRequest& http_request) {
    ResponsesRequest r = parse_responses_request(
        parse_body(http_request.body), options.think_control.max_thinking_tokens,
        [this](const std::string& id) -> std::optional<OrderedJson> {
          const std::shared_ptr<const StoredResponse> stored = responses_store.get(id);
          if (!stored) return std::nullopt;
          return stored->conversation;
        });
    check_model(r.chat.options.model);
    const bool stream = r.chat.options.stream;
    ChatRun run = start_chat(std::move(r.chat));
    const ResponseHeader header{new_response_id("resp_"), unix_time_now(), options.model_id};
    auto request = std::make_shared<const ResponsesRequest>(std::move(r));
    return stream ? stream_response(std::move(run), header, std::move(request))
                  : whole_response(http_request, std::move(run), header, std::move(request));
  }

  // A finished response into the store, with its conversation (for previous_response_id).
  void keep(const ResponsesRequest& request, const OrderedJson& response) {
    if (!request.store) return;
    StoredResponse stored{response, request.conversation};
    for (const OrderedJson& item : response["output"]) stored.conversation.push_back(item);
    responses_store.put(response["id"].get<std::string>(), std::move(stored));
  }

  HttpResponse whole_response(const HttpRequest& http_request, ChatRun run, ResponseHeader header,
                              std::shared_ptr<const ResponsesRequest> request) {
    return whole_one(
        http_request, std::move(run),
        [this, header, request](const GenerationStream& job, const std::string& finish) {
          const std::string status = response_status(finish);
          const Usage usage = usage_of(job);
          return response_json(header, request->settings, status,
                               response_output_json(job.message(), status == "incomplete"), &usage);
        },
        [this, request](const OrderedJson& response) { keep(*request, response); });
  }

  // The Responses stream: response.created and response.in_progress, each delta's item events,
  // then response.completed or response.incomplete (the response kept before it is sent, so a
  // client may fetch or continue it at once), or an error event and response.failed.
  HttpResponse stream_response(ChatRun run, ResponseHeader header,
                               std::shared_ptr<const ResponsesRequest> request) {
    return stream_one(std::move(run), [this, header, request](const GenerationStream& job) {
      auto events = std::make_shared<ResponsesStream>(header, request->settings);
      return StreamShape{
          [events] { return events->start(); },
          [events](const text::chat::ParsedDelta& d) { return events->delta(d); },
          [] { return std::string(); },
          [events](const ApiError& e) { return events->fail(e); },
          [this, events, request, &job](const std::string& finish, const OrderedJson& extension) {
            std::string last = events->finish(finish, usage_of(job), extension);
            keep(*request, events->response());
            return last;
          }};
    });
  }

  static std::string response_id(const HttpRequest& r) {
    return r.path.substr(r.path.rfind("/responses/") + 11);
  }

  static ApiError response_not_found(const std::string& id) {
    return ApiError(404, fmt::format("Response with id '{}' not found.", id), {}, "not_found");
  }

  // GET /v1/responses/{id}: a kept response as it was answered.
  HttpResponse stored_response(const HttpRequest& r) {
    const std::string id = response_id(r);
    const std::shared_ptr<const StoredResponse> stored = responses_store.get(id);
    if (!stored) throw response_not_found(id);
    return json_response(200, stored->response);
  }

  // DELETE /v1/responses/{id}: forgets a kept response.
  HttpResponse delete_response(const HttpRequest& r) {
    const std::string id = response_id(r);
    if (!responses_store.erase(id)) throw response_not_found(id);
    return json_response(200, {{"id", id}, {"object", "response"}, {"deleted", true}});
  }

  // The "strata" extension of a chat response: what think control did, when it had a say, where
  // a cached prompt prefix came from, when one served, and what speculation did, when it ran.
  static std::optional<OrderedJson> chat_extension(const GenerationStream& job, bool routed) {
    const std::optional<control::ThinkReport> think = job.think_report();
    const bool thinking = routed || think.has_value();
    std::optional<OrderedJson> speculated = speculative_extension(job);
    if (!thinking && job.cached_tokens() == 0 && !speculated) return std::nullopt;
    OrderedJson extension = thinking ? strata_extension_json(routed, think) : OrderedJson::object();
    if (job.cached_tokens() > 0)
      extension["prefix_cache"] = {{"cached_tokens", job.cached_tokens()},
                                   {"tier", runtime::cache_tier_name(job.cached_tier())}};
    if (speculated) extension["speculative"] = std::move((*speculated)["speculative"]);
    return extension;
  }

  // {"speculative": {method, drafted, accepted}} when the request speculated (a completion's whole
  // "strata" extension; part of a chat response's).
  static std::optional<OrderedJson> speculative_extension(const GenerationStream& job) {
    const runtime::SpeculativeStats& spec = job.speculative();
    if (spec.method == runtime::SpeculativeParams::Method::kOff) return std::nullopt;
    OrderedJson j = OrderedJson::object();
    j["speculative"] = {{"method", runtime::speculative_method_name(spec.method)},
                        {"drafted", spec.drafted},
                        {"accepted", spec.accepted}};
    return j;
  }

  HttpResponse whole_chat(const HttpRequest& http_request, const Jobs& jobs, ResponseHeader header,
                          bool routed, std::function<void()> ahead) {
    return whole(
        http_request, jobs, [this, jobs, header, routed, ahead](const std::vector<StreamUpdate>& ends) {
          if (ahead && completed_normally(ends.front().finish_reason)) ahead();
          return merged_choices(jobs, [&](size_t i) {
            const GenerationStream& job = *jobs[i];
            OrderedJson logprobs = nullptr;
            if (job.request.top_logprobs >= 0)
              logprobs = chat_logprobs_json(job.logprobs(), token_text(false));
            OrderedJson j = chat_completion_json(header, job.message(), ends[i].finish_reason,
                                                 usage_of(job), std::move(logprobs));
            if (auto extension = chat_extension(job, routed)) j["strata"] = std::move(*extension);
            return j;
          });
        });
  }

  // A non-streaming response: waits for every choice's generation, watching the client (they are
  // cancelled the moment the client goes), then answers with its status: an engine error is a
  // 500, never a 200 with an error body.
  template <typename Body>
  HttpResponse whole(const HttpRequest& http_request, const Jobs& jobs, Body body) {
    std::vector<StreamUpdate> ends;
    const bool completed = follow_all(
        jobs, [&http_request] { return http_request.client_connected(); }, ends,
        [](size_t, const StreamUpdate&) { return true; });
    if (!completed)  // nobody reads this: the client is gone
      return error_response(
          ApiError(499, "The client closed the connection.", {}, "client_closed_request"));
    for (const auto& job : jobs) observe(*job);
    for (const StreamUpdate& u : ends)
      if (auto e = failure(u)) return error_response(*e, error_format(http_request.path));
    return json_response(200, body(ends));
  }

  // A generation that ended as asked (not cancelled, not failed).
  static bool completed_normally(const std::string& finish_reason) {
    return finish_reason == "stop" || finish_reason == "length" || finish_reason == "tool_calls";
  }

  HttpResponse stream_chat(const Jobs& jobs, ResponseHeader header, bool include_usage, bool routed,
                           std::function<void()> ahead) {
    HttpResponse response;
    response.content_type = "text/event-stream";
    response.headers["Cache-Control"] = "no-cache";
    response.stream = [this, jobs, header, include_usage, routed, ahead](BodyWriter& out) {
      const bool with_logprobs = jobs.front()->request.top_logprobs >= 0;
      const TokenText text = token_text(false);
      auto chunk = [&](size_t i, OrderedJson delta, const std::string& finish,
                       const std::vector<OutputLogprob>& logprobs = {}) {
        OrderedJson j =
            chat_chunk_json(header, std::move(delta), finish, include_usage,
                            with_logprobs && !logprobs.empty() ? chat_logprobs_json(logprobs, text)
                                                               : OrderedJson(nullptr));
        j["choices"][0]["index"] = i;
        if (!finish.empty())
          if (auto extension = chat_extension(*jobs[i], routed))
            j["strata"] = std::move(*extension);
        return out.write(sse_event(j));
      };
      stream_choices(
          out, jobs,
          [&](size_t i) {
            return chunk(i, {{"role", "assistant"}, {"content", ""}}, "");
          },
          [&](size_t i, const StreamDelta& d) {
            return chunk(i, delta_json(d.text), "", d.logprobs);
          },
          [&](size_t i, const std::string& finish) {
            chunk(i, OrderedJson::object(), finish);
            if (ahead && completed_normally(finish)) ahead();
          },
          header, include_usage ? "chat.completion.chunk" : nullptr);
    };
    return response;
  }

  HttpResponse completion(const HttpRequest& http_request) {
    const CompletionRequest r = parse_completion_request(parse_body(http_request.body));
    check_model(r.options.model);
    // Before tokenizing: a refusal costs nothing more.
    std::vector<Admission> admissions = admit_choices(r.options.n);
    std::vector<int32_t> prompt;
    std::string prompt_text;
    if (const auto* text = std::get_if<std::string>(&r.prompt)) {
      prompt = model.tokenizer.encode(*text, /*add_special_tokens=*/true);
      prompt_text = *text;
    } else {
      prompt = std::get<std::vector<int32_t>>(r.prompt);
      const int64_t vocab = model.engine.model().config().vocab_size;
      for (int32_t id : prompt)
        if (id >= vocab)
          bad_request("prompt",
                      fmt::format("Token id {} is outside the vocabulary (size {}).", id, vocab));
      if (r.echo) prompt_text = model.tokenizer.decode(prompt);
    }
    if (prompt.empty()) {
      if (!model.tokenizer.bos_id()) bad_request("prompt", "The prompt is empty.");
      prompt.push_back(*model.tokenizer.bos_id());
    }
    const runtime::GenerationRequest g =
        generation_request(r.options, std::move(prompt), "prompt", 16);
    // A shape constrains the whole completion: there is no reasoning block to leave free.
    const std::shared_ptr<text::structured::TokenConstraint> shape =
        answer_constraint(r.response_format);
    Jobs jobs;
    for (int i = 0; i < r.options.n; ++i) {  // each choice its own sequence and seed
      StreamSettings settings;
      settings.skip_special_tokens = true;
      runtime::GenerationRequest choice = g;
      choice.sampling.seed = choice_seed(r.options, g, i);
      if (shape) {
        settings.constraint.emplace();
        settings.constraint->answer = shape;
        settings.constraint->end_ids = choice.stop_ids;
      }
      jobs.push_back(submit(std::move(admissions[static_cast<size_t>(i)]), std::move(choice),
                            r.options, std::move(settings)));
    }
    const ResponseHeader header{new_response_id("cmpl-"), unix_time_now(), options.model_id};
    const std::string echo = r.echo ? prompt_text : std::string();
    return r.options.stream ? stream_completion(jobs, header, r.options.include_usage, echo)
                            : whole_completion(http_request, jobs, header, echo);
  }

  HttpResponse whole_completion(const HttpRequest& http_request, const Jobs& jobs,
                                ResponseHeader header, std::string echo) {
    return whole(
        http_request, jobs, [this, jobs, header, echo](const std::vector<StreamUpdate>& ends) {
          return merged_choices(jobs, [&](size_t i) {
            const GenerationStream& job = *jobs[i];
            OrderedJson logprobs = nullptr;
            if (job.request.top_logprobs >= 0)
              logprobs = completion_logprobs_json(job.logprobs(), token_text(true));
            OrderedJson j = completion_json(header, echo + job.message().content, ends[i].finish_reason,
                                            usage_of(job), std::move(logprobs));
            if (auto extension = speculative_extension(job)) j["strata"] = std::move(*extension);
            return j;
          });
        });
  }

  HttpResponse stream_completion(const Jobs& jobs, ResponseHeader header, bool include_usage,
                                 std::string echo) {
    HttpResponse response;
    response.content_type = "text/event-stream";
    response.headers["Cache-Control"] = "no-cache";
    response.stream = [this, jobs, header, include_usage, echo](BodyWriter& out) {
      const bool with_logprobs = jobs.front()->request.top_logprobs >= 0;
      const TokenText token = token_text(true);
      auto chunk = [&](size_t i, const std::string& text, const std::string& finish,
                       const std::vector<OutputLogprob>& logprobs = {}) {
        OrderedJson j = completion_chunk_json(header, text, finish, include_usage,
                                              with_logprobs && !logprobs.empty()
                                                  ? completion_logprobs_json(logprobs, token)
                                                  : OrderedJson(nullptr));
        j["choices"][0]["index"] = i;
        if (!finish.empty())
          if (auto extension = speculative_extension(*jobs[i])) j["strata"] = std::move(*extension);
        return out.write(sse_event(j));
      };
      stream_choices(
          out, jobs, [&](size_t i) { return echo.empty() || chunk(i, echo, ""); },
          [&](size_t i, const StreamDelta& d) { return chunk(i, d.text.content, "", d.logprobs); },
          [&](size_t i, const std::string& finish) { chunk(i, "", finish); }, header,
          include_usage ? "text_completion" : nullptr);
    };
    return response;
  }
};

Server::Server(ServerOptions options, ServedModel model)
    : impl_(std::make_unique<Impl>(std::move(options), model)) {}

Server::~Server() = default;

int Server::bind() { return impl_->http.bind(); }

void Server::run() { impl_->http.run(); }

void Server::shutdown(std::chrono::milliseconds grace) {
  // Connections still open a moment after the generations were cancelled are shut, so that no
  // client that stopped reading holds the process.
  impl_->http.stop(grace + kShutdownMargin);
  impl_->queue.close(grace);
}

}  // namespace strata::server
