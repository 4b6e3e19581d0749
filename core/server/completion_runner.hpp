// The engine side of `strata serve` for now: one thread that runs the queued requests one after another on one
// session (one slot), reusing the cached prefix a request shares with the last one (a chat resent with one more
// turn reads only the new part). A request's text reaches its connection through a CompletionStream, so a slow
// client never holds up the engine. Continuous batching over several slots replaces this (issue 35).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/engine/engine.hpp"
#include "core/server/metrics.hpp"
#include "core/server/openai_request.hpp"
#include "core/tokenizer/tokenizer.hpp"

namespace strata::server {

// How a request ended: finish_reason "stop" (an end token or a stop string) or "length" (max_tokens or the
// context), or an error with the HTTP status it deserves (400: the request cannot run, 500: the engine failed,
// 503: the server stopped first).
struct CompletionOutcome {
  std::string finish_reason;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;   // prompt tokens the cache already held
  double queue_seconds = 0.0;  // from submit() to the engine taking it
  std::string error;
  int status = 200;
};

// One request's events, made on the engine's thread and taken on its connection's.
class CompletionStream {
 public:
  void push_text(const std::string& text);
  void finish(CompletionOutcome outcome);
  // The client went away: the engine stops the request at its next token.
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

  struct News {
    std::string text;                      // what arrived since the last call
    std::optional<CompletionOutcome> end;  // once the request has ended
  };
  // Waits at most timeout for news (the caller loops, checking its own state between waits).
  News wait(std::chrono::milliseconds timeout);

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string text_;
  std::optional<CompletionOutcome> end_;
  std::atomic<bool> cancelled_{false};
};

// Test only (`strata serve --test-fault KIND@K`, docs/serving.md): at the K-th token this process generates, the
// engine crashes (abort), hangs (sleeps for good) or fails (throws as a failed backend call would); or (hang@load)
// the worker hangs before it loads the model.
struct FaultInjection {
  enum class Kind { none, crash, hang, error, hang_at_load } kind = Kind::none;
  int64_t at_token = 0;
};

// Parses KIND@K (crash@12) or hang@load; throws strata::Error naming --test-fault.
FaultInjection parse_fault(const std::string& text);

struct RunnerOptions {
  int32_t n_ctx = 4096;  // positions of the session's cache
  int32_t kv_type = 0;   // STRATA_KV_*
  ExecutionOptions execution;
  size_t queue_capacity = 64;  // requests waiting beside the one running; more are refused (429)
  FaultInjection fault;        // test only
};

// Where the routes send requests: the runner, or in tests a source that answers as a script says.
class CompletionSource {
 public:
  virtual ~CompletionSource() = default;
  // Queues request and returns its stream, or nullptr when the queue is full.
  virtual std::shared_ptr<CompletionStream> submit(CompletionRequest request) = 0;
  // Its state for /metrics and /health: requests running and waiting, cache use, the engine's expert placement.
  virtual MetricsGauges gauges() const = 0;
};

class CompletionRunner : public CompletionSource {
 public:
  // Keeps a reference to engine. Throws what Session's constructor throws (a cache that does not fit).
  CompletionRunner(const Engine& engine, const RunnerOptions& options);
  // Finishes the request running; those still queued end with 503.
  ~CompletionRunner();
  CompletionRunner(const CompletionRunner&) = delete;
  CompletionRunner& operator=(const CompletionRunner&) = delete;

  std::shared_ptr<CompletionStream> submit(CompletionRequest request) override;
  MetricsGauges gauges() const override;
  int32_t context_size() const { return options_.n_ctx; }

 private:
  struct Job {
    CompletionRequest request;
    std::shared_ptr<CompletionStream> stream;
    std::chrono::steady_clock::time_point queued;
  };
  void loop();
  void run(Job& job);
  std::vector<int32_t> prompt_tokens(const CompletionRequest& request) const;

  const Engine& engine_;
  const RunnerOptions options_;
  const tokenizer::Tokenizer tokenizer_;
  const std::set<int32_t> end_tokens_;
  Session session_;
  std::vector<int32_t> cached_;  // the tokens the session's cache holds, in order
  std::atomic<bool> running_{false};
  std::atomic<int32_t> cache_used_{0};   // the session's position, for gauges() on other threads
  std::atomic<int64_t> progress_ns_{0};  // steady clock: when the running request last made progress
  int64_t tokens_made_ = 0;              // by this process, for the fault injector
  mutable std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace strata::server
