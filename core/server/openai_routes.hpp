// The OpenAI-compatible endpoints of `strata serve` over a CompletionSource (the runner): /v1/chat/completions and
// /v1/completions (whole answers or server-sent events), /v1/models, /health, /ready and /metrics (Prometheus). Errors
// are OpenAI's shape,
// {"error": {"message", "type", "param"}}: 400 names the field at fault, 401 a wrong API key, 404/405 a wrong
// path or method, 429 a full queue (with Retry-After).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "core/server/completion_runner.hpp"
#include "core/server/http_server.hpp"
#include "core/server/metrics.hpp"

namespace strata::server {

struct RoutesOptions {
  std::string model_id;  // what /v1/models lists and the answers name
  std::string api_key;   // non-empty: every endpoint but /health wants "Authorization: Bearer <key>"
};

class OpenAiRoutes {
 public:
  // Keeps a reference to source.
  OpenAiRoutes(CompletionSource& source, RoutesOptions options);

  void handle(const HttpRequest& request, HttpReply& reply);

 private:
  void complete(const HttpRequest& request, HttpReply& reply, bool chat);

  CompletionSource& source_;
  const RoutesOptions options_;
  const int64_t started_;  // seconds since the epoch: the model's "created"
  ServerMetrics metrics_;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace strata::server
