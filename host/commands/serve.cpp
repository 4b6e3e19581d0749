// strata serve --model M [--host H] [--port P]: the OpenAI-compatible HTTP server (docs/serving.md). Runs until
// SIGINT or SIGTERM, then finishes the requests in flight.
#include <signal.h>

#include <algorithm>
#include <optional>

#include "core/engine/context_size.hpp"
#include "core/engine/engine.hpp"
#include "core/server/completion_runner.hpp"
#include "core/server/http_server.hpp"
#include "core/server/openai_routes.hpp"
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
};

bool loopback(const std::string& host) { return host == "127.0.0.1" || host == "::1" || host == "localhost"; }

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

  command->callback([options] {
    if (!loopback(options->host) && options->api_key.empty()) {
      throw Error("--host " + options->host + " listens beyond this machine: give an --api-key");
    }
    const Engine engine(options->engine);
    const ModelConfig& config = engine.model().config();
    const int32_t n_ctx = options->ctx             ? checked_context_size(config, *options->ctx)
                          : config.n_ctx_train > 0 ? std::min(kDefaultServeContext, config.n_ctx_train)
                                                   : kDefaultServeContext;
    // The signals wait for this thread: every thread started from here on inherits the mask.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    server::CompletionRunner runner(engine, {.n_ctx = n_ctx,
                                             .kv_type = parse_kv_type(options->kv),
                                             .execution = options->engine.execution,
                                             .queue_capacity = options->queue});
    const std::string model_id =
        options->model_id.empty() ? engine.file().first().path().filename().string() : options->model_id;
    server::OpenAiRoutes routes(runner, {.model_id = model_id, .api_key = options->api_key});
    server::HttpServer http(
        options->host, options->port,
        [&routes](const server::HttpRequest& request, server::HttpReply& reply) { routes.handle(request, reply); });
    log().info("serving {} on http://{}:{} (context {}, one request at a time)", model_id, options->host, http.port(),
               n_ctx);
    int signal = 0;
    sigwait(&signals, &signal);
    log().info("{}: stopping", signal == SIGINT ? "SIGINT" : "SIGTERM");
    http.stop();
  });
}

}  // namespace strata::host
