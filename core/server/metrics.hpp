// What `strata serve` reports at /metrics, in Prometheus' text format: vLLM's metric names under a `strata_`
// prefix (vLLM's own `vllm:` colon fails `promtool check metrics`: colons are for recording rules), requests
// running and waiting, token counters, latency histograms, the worker's state, and our users' gauges (batch
// slots, expert slots, pool workers, expert hit rate). Thread-safe: the connections record, the scraper reads.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace strata::server {

// A latency histogram in seconds with fixed upper bounds (le), cumulative as Prometheus wants them.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double seconds);
  // The metric's lines: _bucket{le=...} for each bound and +Inf, _sum, _count.
  std::string text(const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bound, not cumulative; the last is +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

// Values the server reads from its parts when scraped.
struct MetricsGauges {
  int64_t running = 0;
  int64_t waiting = 0;
  double step_age_seconds = 0.0;  // since the engine last made progress on a running request (0: idle)
  double kv_cache_usage = 0.0;    // 0 to 1: the share of the slots' cache in use
  int64_t batch_slots = 1;
  int64_t expert_slots = 0;            // a hybrid placement's VRAM expert slots (0: none)
  int64_t pool_workers = 0;            // its CPU expert pool's threads (0: no pool)
  double expert_hit_rate = 0.0;        // the share of routed pairs the resident experts took
  std::string worker_state = "ready";  // loading, ready or restarting
  int64_t worker_restarts = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();

  // A request that ended: its finish reason ("stop", "length", "tool_calls") or, on failure, "error"; its
  // token counts; its times in seconds (queue: waiting to run; first_token: arrival to the first text, < 0
  // where none came; e2e: arrival to the end).
  void record(const std::string& finish_reason, int64_t prompt_tokens, int64_t generation_tokens, double queue,
              double first_token, double e2e);

  // The whole /metrics page. version names the build (strata:build_info).
  std::string text(const MetricsGauges& gauges, const std::string& version) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, uint64_t> finished_;  // by finish reason
  uint64_t prompt_tokens_ = 0;
  uint64_t generation_tokens_ = 0;
  Histogram queue_time_;
  Histogram first_token_;
  Histogram per_output_token_;
  Histogram e2e_;
};

}  // namespace strata::server
