// strata serve --model M [--host H] [--port P]: the OpenAI-compatible HTTP server (docs/serving.md). A supervisor
// (HTTP, queue, metrics) and an engine worker, a child process that owns the model and which the supervisor restarts
// when it dies. Runs until SIGINT or SIGTERM, then finishes the requests in flight.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/engine/context_size.hpp"
#include "core/engine/engine.hpp"
#include "core/server/completion_runner.hpp"
#include "core/server/engine_worker.hpp"
#include "core/server/http_server.hpp"
#include "core/server/openai_routes.hpp"
#include "core/server/worker_source.hpp"
#include "core/util/error.hpp"
#include "core/util/log.hpp"
#include "host/commands/commands.hpp"
#include "host/commands/engine_options.hpp"

namespace strata::host {
namespace {

constexpr int32_t kDefaultServeContext = 8192;

struct ServeOptions {
  EngineOptions engine;
  std::string host = "127.0.0.1";
  uint16_t port = 8080;
  std::string api_key;
  std::optional<int32_t> ctx;
  std::string kv = "f16";
  size_t queue = 64;
  std::string model_id;
  bool worker = true;             // the engine in a child process (else in this one)
  int worker_fd = -1;             // >= 0: this process is the engine worker, its channel on this fd
  std::string test_fault;         // KIND@K for the first worker (test only)
  double watchdog_s = 60.0;       // no progress for this long: stall report, new worker
  double load_timeout_s = 900.0;  // a worker not ready this long after it started: stall report, killed
  int32_t parallel = 1;           // slots decoding together
  std::string config;             // expanded before parsing (serve_config.hpp); kept for --help
};

bool loopback(const std::string& host) { return host == "127.0.0.1" || host == "::1" || host == "localhost"; }

// This process's command line, to start the worker with the same flags: the executable as /proc/self/exe names it
// (a relative argv[0] would break after a chdir), without --test-fault (the supervisor gives it to the first worker
// only).
std::vector<std::string> worker_command() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> arguments;
  for (std::string argument; std::getline(file, argument, '\0');) arguments.push_back(argument);
  if (arguments.empty()) throw Error("cannot read this process's command line (/proc/self/cmdline)");
  arguments[0] = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<std::string> kept;
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i] == "--test-fault") {
      ++i;
      continue;
    }
    if (arguments[i].rfind("--test-fault=", 0) == 0) continue;
    kept.push_back(arguments[i]);
  }
  return kept;
}

int32_t context_of(const Engine& engine, const std::optional<int32_t>& requested) {
  const ModelConfig& config = engine.model().config();
  return requested                ? checked_context_size(config, *requested)
         : config.n_ctx_train > 0 ? std::min(kDefaultServeContext, config.n_ctx_train)
                                  : kDefaultServeContext;
}

}  // namespace

void register_serve_command(CLI::App& app) {
  auto options = std::make_shared<ServeOptions>();
  auto* command = app.add_subcommand(
      "serve",
      "OpenAI-compatible HTTP server: /v1/chat/completions, /v1/completions, /v1/models, /health (docs/serving.md). "
      "For now one request runs at a time on one slot; the others wait in the queue");
  add_engine_options(command, options->engine);
  command->add_option("--host", options->host, "Address to listen on")->capture_default_str();
  command->add_option("--port", options->port, "Port to listen on (0: one the system picks, logged)")
      ->capture_default_str();
  command->add_option("--api-key", options->api_key,
                      "Every endpoint but /health wants 'Authorization: Bearer KEY' (required with a --host other than "
                      "loopback)");
  command->add_option("--ctx", options->ctx,
                      "Context size of the slot, at least 1 (default: " + std::to_string(kDefaultServeContext) +
                          ", or the model's context length when shorter): a request's prompt and reply share it");
  command->add_option("--kv", options->kv, "KV cache type: f16 or int8")->capture_default_str();
  command->add_option("--queue", options->queue, "Requests that may wait beside the one running; more get 429")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  command->add_option("--model-id", options->model_id,
                      "The model's name in /v1/models and the answers (default: the file's name)");
  command
      ->add_option("--worker", options->worker,
                   "1: the model runs in an engine worker process, which the server restarts when it dies, running "
                   "the requests in flight again; 0: in the server's own process (a fault ends the server)")
      ->capture_default_str();
  command
      ->add_option("--watchdog-s", options->watchdog_s,
                   "With --worker 1: a running request that makes no progress for this long (a token, or a piece of "
                   "1,024 tokens of its prompt) gets a stall report in the log, with the worker's thread stacks, and a "
                   "new worker (0: "
                   "no watchdog)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--load-timeout-s", options->load_timeout_s,
                   "With --worker 1: a worker still loading the model after this long gets a stall report in the log, "
                   "with its thread stacks, and is killed; at start the server then fails, later the worker is "
                   "started again (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command->add_option("--test-fault", options->test_fault,
                      "TEST ONLY: the first engine worker crashes (crash@K), hangs (hang@K) or fails a request "
                      "(error@K) at the K-th token it generates, or hangs before it loads the model (hang@load)");
  command->add_option(
      "--config", options->config,
      "A JSON file of settings, expanded into the flags they stand for: {\"model\": PATH, \"args\": [FLAGS...], "
      "\"parallel\": N, \"gpu\": N, \"env\": {NAME: VALUE}, \"layer_split\": null}; a key also given as a flag, or "
      "unknown, is an error naming it (docs/serving.md)");
  command
      ->add_option("--parallel", options->parallel,
                   "Slots that decode together; only 1 for now (continuous batching over several slots is not built "
                   "yet: the other requests wait in the queue)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](const std::string& text) -> std::string {
            return text == "1" ? "" : text + " slots: continuous batching over several slots is not built yet (1 only)";
          },
          "1"));
  // The supervisor starts its worker with this: the channel's descriptor.
  command->add_option("--worker-fd", options->worker_fd)->group("");

  command->callback([options] {
    const server::FaultInjection fault =
        options->test_fault.empty() ? server::FaultInjection{} : server::parse_fault(options->test_fault);
    if (options->worker_fd >= 0) {      // the engine worker: the supervisor started it
      server::install_stack_printer();  // a load that hangs can be shown
      if (fault.kind == server::FaultInjection::Kind::hang_at_load) {
        for (;;) ::pause();
      }
      const Engine engine(options->engine);
      server::CompletionRunner runner(engine, {.n_ctx = context_of(engine, options->ctx),
                                               .kv_type = parse_kv_type(options->kv),
                                               .execution = options->engine.execution,
                                               .queue_capacity = options->queue + 1,
                                               .fault = fault});
      log().info("engine worker ready (context {})", runner.context_size());
      server::serve_supervisor(options->worker_fd, runner);
      return;
    }
    if (!loopback(options->host) && options->api_key.empty()) {
      throw Error("--host " + options->host + " listens beyond this machine: give an --api-key");
    }
    const std::string model_id =
        options->model_id.empty() ? options->engine.model.filename().string() : options->model_id;
    // The signals wait for this thread: every thread started from here on inherits the mask (the worker gets a
    // clear one).
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    std::unique_ptr<Engine> engine;
    std::unique_ptr<server::CompletionSource> source;
    if (options->worker) {
      server::WorkerOptions worker;
      worker.command = worker_command();
      worker.capacity = options->queue + 1;
      worker.watchdog = std::chrono::milliseconds(static_cast<int64_t>(options->watchdog_s * 1000.0));
      worker.load_timeout = std::chrono::milliseconds(static_cast<int64_t>(options->load_timeout_s * 1000.0));
      if (!options->test_fault.empty()) worker.first_extra = {"--test-fault", options->test_fault};
      source = std::make_unique<server::WorkerSource>(std::move(worker));
    } else {
      engine = std::make_unique<Engine>(options->engine);
      source = std::make_unique<server::CompletionRunner>(
          *engine, server::RunnerOptions{.n_ctx = context_of(*engine, options->ctx),
                                         .kv_type = parse_kv_type(options->kv),
                                         .execution = options->engine.execution,
                                         .queue_capacity = options->queue,
                                         .fault = fault});
    }
    server::OpenAiRoutes routes(*source, {.model_id = model_id, .api_key = options->api_key});
    server::HttpServer http(
        options->host, options->port,
        [&routes](const server::HttpRequest& request, server::HttpReply& reply) { routes.handle(request, reply); });
    log().info("serving {} on http://{}:{} ({}; one request at a time)", model_id, options->host, http.port(),
               options->worker ? "engine in a worker process" : "engine in this process");
    int signal = 0;
    sigwait(&signals, &signal);
    log().info("{}: stopping", signal == SIGINT ? "SIGINT" : "SIGTERM");
    http.stop();
  });
}

}  // namespace strata::host
