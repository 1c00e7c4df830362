// strata serve: load a model and serve the OpenAI-compatible API until SIGINT or SIGTERM. The first
// signal stops accepting requests and lets generations in progress finish (for up to
// --shutdown-timeout seconds); a second one cancels them at once.
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/model_loading.h"
#include "control/think_control.h"
#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "runtime/engine.h"
#include "server/server.h"
#include "text/chat/chat_template.h"
#include "text/tokenizer.h"

namespace strata::cli {

namespace {

// The name clients use for the model: its directory or file name without ".gguf".
std::string model_name(const std::string& path) {
  std::filesystem::path p(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  return p.extension() == ".gguf" ? p.stem().string() : p.filename().string();
}

int64_t context_size(int64_t requested, const model::ModelConfig& config) {
  if (requested > 0) {
    if (config.max_position_embeddings > 0 && requested > config.max_position_embeddings)
      log::warn("a context of {} tokens is beyond the {} positions the model was trained for",
                requested, config.max_position_embeddings);
    return requested;
  }
  const int64_t trained =
      config.max_position_embeddings > 0 ? config.max_position_embeddings : 4096;
  return std::min<int64_t>(trained, 4096);
}

// SIGINT/SIGTERM reach a handler that only writes the signal number to a pipe (all a handler may
// safely do, in whichever thread the kernel picked, OpenBLAS's included); a watcher thread reads
// it. The pipe's write end is the one global this needs.
std::atomic<int> signal_pipe_write{-1};

void on_shutdown_signal(int sig) {
  const int fd = signal_pipe_write.load();
  const char byte = static_cast<char>(sig);
  if (fd >= 0) {
    const ssize_t written = ::write(fd, &byte, 1);  // nothing to do if the pipe is full
    (void)written;
  }
}

// Shuts the server down on signals: gracefully the first time, at once the second.
void watch_signals(server::Server& server, int read_fd, std::chrono::milliseconds grace,
                   const std::atomic<bool>& finished) {
  std::vector<std::thread> closers;
  int received = 0;
  while (!finished) {
    pollfd p{read_fd, POLLIN, 0};
    char byte;
    if (::poll(&p, 1, 200) <= 0 || ::read(read_fd, &byte, 1) != 1) continue;
    ++received;
    std::fprintf(stderr, received == 1 ? "strata: shutting down (again to cancel generations now)\n"
                                       : "strata: cancelling generations\n");
    const auto wait = received == 1 ? grace : std::chrono::milliseconds(0);
    closers.emplace_back([&server, wait] { server.shutdown(wait); });
  }
  for (auto& t : closers) t.join();
}

// The think control config: the built-in one, or --think-config's file (checked before the model
// loads, so a bad file fails fast).
control::ThinkControlConfig think_config(const std::string& path) {
  if (path.empty()) return control::ThinkControlConfig::defaults();
  try {
    return control::ThinkControlConfig::from_json(read_json_file(path));
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("--think-config {}: {}", path, e.what()));
  }
}

}  // namespace

// A server's large buffers (request bodies, a parse's text and arrays) are mapped and unmapped
// by malloc instead of joining a thread's arena: glibc otherwise raises its mapping threshold to
// the largest block freed (up to 32 MiB) and keeps every arena's top, so a hundred 16 MiB
// requests spread over the HTTP workers left the process 860 MB larger. Below 4 MiB nothing
// changes (the engine's per-step buffers are smaller, or reused).
void keep_large_buffers_out_of_arenas() {
#ifdef __GLIBC__
  ::mallopt(M_MMAP_THRESHOLD, 4 << 20);
#endif
}

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

server::ConnectionPolicy connection_policy(const ServeArgs& args) {
  server::ConnectionPolicy p;
  p.limits.max_body_bytes = args.max_body_bytes;
  // Room for a few maximal bodies at once, whatever the body limit.
  p.max_body_memory = std::max(p.max_body_memory, 4 * args.max_body_bytes);
  p.max_connections = args.max_connections;
  p.max_connections_per_client = args.max_connections_per_client;
  p.head_timeout = milliseconds(args.header_timeout);
  p.body_timeout = milliseconds(args.body_timeout);
  p.idle_timeout = milliseconds(args.keep_alive_timeout);
  p.write_timeout = milliseconds(args.write_timeout);
  return p;
}

// Each connection is a descriptor: the soft open-file limit (often 1024) rises to the hard one,
// so that --max-connections can be met.
void raise_open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

// The memory sequence state may take: --state-budget, else half the GPU's free memory (1 GiB on
// the CPU).
double state_budget(const Settings& settings, const model::Model& model) {
  if (settings.state_budget_mib > 0) return static_cast<double>(settings.state_budget_mib) * 1024.0 * 1024.0;
  return model.device() == Device::kCpu ? 1024.0 * 1024.0 * 1024.0
                                        : 0.5 * static_cast<double>(backend::device_info(model.device()).free_bytes);
}

// --parallel, or as many slots as half the budget's recurrent state holds (at least 1, at most 64,
// and no more than requests may be admitted).
int64_t parallel_slots(const ServeArgs& args, const model::Model& model) {
  constexpr int64_t kMaxAuto = 64;
  const Settings& settings = args.settings;
  if (settings.parallel > 0) return settings.parallel;
  const int64_t most = std::min<int64_t>(kMaxAuto, static_cast<int64_t>(std::max<size_t>(args.max_concurrency, 1)));
  const auto fixed = static_cast<double>(model.info().state_bytes_fixed);
  if (fixed <= 0) return most;
  return std::clamp<int64_t>(static_cast<int64_t>(0.5 * state_budget(settings, model) / fixed), 1, most);
}

// --kv-blocks, or what the budget holds after the slots' recurrent state: at least one whole
// context, at most every slot's.
int64_t kv_blocks(const Settings& settings, const model::Model& model, int64_t parallel, int64_t ctx) {
  if (settings.kv_blocks > 0) return settings.kv_blocks;
  const model::ModelInfo info = model.info();
  const double left = state_budget(settings, model) - static_cast<double>(parallel) * static_cast<double>(info.state_bytes_fixed);
  const double block = static_cast<double>(std::max<size_t>(runtime::StatePool::block_bytes(info), 1));
  const int64_t whole = runtime::StatePool::blocks_for(ctx, runtime::StatePool::kBlockTokens);
  return std::clamp<int64_t>(static_cast<int64_t>(std::max(left, 0.0) / block), whole, parallel * whole);
}

int run_serve(const ServeArgs& args) {
  ::signal(SIGPIPE, SIG_IGN);  // a client that went away is seen as a failed write
  ::signal(SIGXFSZ, SIG_IGN);  // a file-size limit makes a prefix-cache write fail, not the process
  keep_large_buffers_out_of_arenas();
  raise_open_file_limit();

  const control::ThinkControlConfig think_control = think_config(args.think_config);
  auto tokenizer = text::Tokenizer::load(args.model);
  const text::chat::ChatTemplate chat_template =
      text::chat::ChatTemplate::load(args.model, args.chat_template);
  auto model = model::load_model(args.model, load_options(args.settings, args.quantize));
  const int64_t ctx = context_size(args.settings.ctx_size, model->config());
  runtime::EngineOptions engine_opts = engine_options(args.settings, ctx);
  engine_opts.prefix_cache_lock_host = true;  // a server demotes sooner or later: lock at start
  engine_opts.parallel = parallel_slots(args, *model);
  engine_opts.kv_blocks = kv_blocks(args.settings, *model, engine_opts.parallel, ctx);
  const int64_t parallel = engine_opts.parallel;
  runtime::Engine engine(std::move(model), engine_opts);

  server::ServerOptions options;
  options.host = args.host;
  options.port = args.port;
  options.api_key = args.api_key;
  options.max_concurrency = args.max_concurrency;
  options.connections = connection_policy(args);
  // A hub repository is served under the reference given (org/name[:quant]) and its name alone.
  const std::string name = args.model_ref.empty() ? model_name(args.model) : args.model_ref;
  options.model_id = args.alias.empty() ? name : args.alias.front();
  options.aliases = args.alias;
  options.aliases.push_back(name);
  if (!args.model_ref.empty())
    options.aliases.push_back(model_name(args.model_ref.substr(0, args.model_ref.find_first_of("@:"))));
  options.aliases.push_back(model_name(args.model));
  options.aliases.push_back(args.model);
  options.think_control = think_control;
  options.settings = args.settings;

  server::Server server(options, server::ServedModel{engine, *tokenizer, chat_template});
  const int port = server.bind();
  std::fprintf(stderr, "strata: serving '%s' (context %lld, %lld at once, chat template: %s) on http://%s:%d\n",
               options.model_id.c_str(), static_cast<long long>(ctx), static_cast<long long>(parallel),
               chat_template.origin().c_str(), args.host.c_str(), port);
  std::fflush(stderr);

  int pipe_fds[2];
  check(::pipe(pipe_fds) == 0, ErrorKind::kIo, "cannot create a pipe for signal handling");
  signal_pipe_write = pipe_fds[1];
  struct sigaction action {};
  action.sa_handler = on_shutdown_signal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);

  std::atomic<bool> finished{false};
  std::thread watcher(watch_signals, std::ref(server), pipe_fds[0],
                      milliseconds(args.shutdown_timeout), std::cref(finished));
  server.run();
  finished = true;
  watcher.join();
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  signal_pipe_write = -1;
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  std::fprintf(stderr, "strata: stopped\n");
  return 0;
}

}  // namespace strata::cli
