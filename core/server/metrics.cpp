#include "core/server/metrics.hpp"

#include <algorithm>
#include <sstream>

namespace strata::server {
namespace {

// Bounds as vLLM's: from tens of milliseconds (a token) to minutes (a long prompt behind a queue).
const std::vector<double> kLatencyBounds = {0.01, 0.025, 0.05, 0.075, 0.1,  0.25, 0.5,   0.75,  1.0,   2.5,
                                            5.0,  7.5,   10.0, 20.0,  40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kTokenBounds = {0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1,
                                          0.15,  0.2,  0.3,   0.4,  0.5,   0.75, 1.0,  2.5,  5.0};

std::string number(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

// One metric's HELP and TYPE lines.
void describe(std::ostringstream& out, const std::string& name, const char* type, const char* help) {
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

void gauge(std::ostringstream& out, const std::string& name, const char* help, double value) {
  describe(out, name, "gauge", help);
  out << name << " " << number(value) << "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double seconds) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin();
  ++counts_[bucket];
  sum_ += seconds;
  ++count_;
}

std::string Histogram::text(const std::string& name) const {
  std::ostringstream out;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out << name << "_bucket{le=\"" << number(bounds_[i]) << "\"} " << cumulative << "\n";
  }
  out << name << "_bucket{le=\"+Inf\"} " << count_ << "\n";
  out << name << "_sum " << number(sum_) << "\n" << name << "_count " << count_ << "\n";
  return out.str();
}

ServerMetrics::ServerMetrics()
    : queue_time_(kLatencyBounds), first_token_(kLatencyBounds), per_output_token_(kTokenBounds), e2e_(kLatencyBounds) {
  for (const char* reason : {"stop", "length", "tool_calls", "error"}) finished_[reason] = 0;
}

void ServerMetrics::record(const std::string& finish_reason, int64_t prompt_tokens, int64_t generation_tokens,
                           double queue, double first_token, double e2e) {
  std::lock_guard lock(mutex_);
  ++finished_[finish_reason];
  prompt_tokens_ += static_cast<uint64_t>(std::max<int64_t>(prompt_tokens, 0));
  generation_tokens_ += static_cast<uint64_t>(std::max<int64_t>(generation_tokens, 0));
  queue_time_.observe(queue);
  e2e_.observe(e2e);
  if (first_token < 0.0) return;
  first_token_.observe(first_token);
  if (generation_tokens > 1)
    per_output_token_.observe((e2e - first_token) / static_cast<double>(generation_tokens - 1));
}

std::string ServerMetrics::text(const MetricsGauges& gauges, const std::string& version) const {
  std::ostringstream out;
  gauge(out, "strata_num_requests_running", "Requests running in the engine.", static_cast<double>(gauges.running));
  gauge(out, "strata_num_requests_waiting", "Requests waiting in the queue.", static_cast<double>(gauges.waiting));
  gauge(out, "strata_kv_cache_usage_perc", "Share of the slots' KV cache in use, 0 to 1.", gauges.kv_cache_usage);
  gauge(out, "strata_batch_slots", "Slots (sequences the engine runs at once).",
        static_cast<double>(gauges.batch_slots));
  gauge(out, "strata_expert_slots", "VRAM expert slots of a hybrid placement (0: none).",
        static_cast<double>(gauges.expert_slots));
  gauge(out, "strata_pool_workers", "Threads of a hybrid placement's CPU expert pool (0: none).",
        static_cast<double>(gauges.pool_workers));
  gauge(out, "strata_expert_hit_rate", "Share of routed (token, expert) pairs the VRAM-resident experts took.",
        gauges.expert_hit_rate);
  describe(out, "strata_worker_state", "gauge", "The engine worker's state: 1 for the current one.");
  for (const char* state : {"loading", "ready", "restarting"}) {
    out << "strata_worker_state{state=\"" << state << "\"} " << (gauges.worker_state == state ? 1 : 0) << "\n";
  }
  describe(out, "strata_worker_restarts_total", "counter", "Times the engine worker was restarted.");
  out << "strata_worker_restarts_total " << gauges.worker_restarts << "\n";
  describe(out, "strata_build_info", "gauge", "The build: its version as a label.");
  out << "strata_build_info{version=\"" << version << "\"} 1\n";

  std::lock_guard lock(mutex_);
  describe(out, "strata_prompt_tokens_total", "counter", "Prompt tokens of the finished requests.");
  out << "strata_prompt_tokens_total " << prompt_tokens_ << "\n";
  describe(out, "strata_generation_tokens_total", "counter", "Tokens generated for the finished requests.");
  out << "strata_generation_tokens_total " << generation_tokens_ << "\n";
  describe(out, "strata_request_success_total", "counter", "Finished requests by finish reason (error: failed).");
  for (const auto& [reason, count] : finished_) {
    out << "strata_request_success_total{finished_reason=\"" << reason << "\"} " << count << "\n";
  }
  describe(out, "strata_request_queue_time_seconds", "histogram", "Time requests waited in the queue.");
  out << queue_time_.text("strata_request_queue_time_seconds");
  describe(out, "strata_time_to_first_token_seconds", "histogram", "Time from a request's arrival to its first text.");
  out << first_token_.text("strata_time_to_first_token_seconds");
  describe(out, "strata_time_per_output_token_seconds", "histogram", "Time per generated token after the first.");
  out << per_output_token_.text("strata_time_per_output_token_seconds");
  describe(out, "strata_e2e_request_latency_seconds", "histogram", "Time from a request's arrival to its end.");
  out << e2e_.text("strata_e2e_request_latency_seconds");
  return out.str();
}

}  // namespace strata::server
