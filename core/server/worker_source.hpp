// The supervisor's side of the engine worker: `strata serve` runs the model in a child process (the worker,
// `strata serve ... --worker-fd 3`) and talks to it over a socket pair (worker_protocol.hpp). When the worker dies
// (a crash, a CUDA error that poisons its context, an OOM kill), this restarts it, with backoff, and runs the
// requests in flight again: a request keeps its seed, so the new worker makes the same tokens, and the text its
// client already has is skipped. Clients see a pause, not an error; a request that was running when the worker
// died twice fails alone. The server is never left without a worker.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/server/completion_runner.hpp"

namespace strata::server {

struct WorkerOptions {
  std::vector<std::string> command;      // the worker's argv: the strata executable and its flags
  std::vector<std::string> first_extra;  // flags only the first worker gets (the test-only fault injector)
  size_t capacity = 65;                  // requests in flight at most (running and queued); more get 429
  std::chrono::milliseconds first_backoff{250};
  std::chrono::milliseconds max_backoff{8000};
  // No progress on a running request for this long (the worker's own count, or no frame from it at all): the
  // watchdog writes a stall report to the log, with the worker's thread stacks, and replaces the worker. 0: off.
  std::chrono::milliseconds watchdog{60000};
  // A worker not ready this long after it started (loading the model) gets a stall report with its thread stacks and
  // is killed: at the first start the server fails, later it is started again. 0: no limit.
  std::chrono::milliseconds load_timeout{900000};
};

class WorkerSource : public CompletionSource {
 public:
  // Starts the first worker and waits until it has loaded the model; throws strata::Error (with the worker's
  // exit status) where it dies first: a model that cannot load will not load on a retry either.
  explicit WorkerSource(WorkerOptions options);
  // Closes the channel, so the worker finishes its request and exits; kills it after 10 s.
  ~WorkerSource();
  WorkerSource(const WorkerSource&) = delete;
  WorkerSource& operator=(const WorkerSource&) = delete;

  std::shared_ptr<CompletionStream> submit(CompletionRequest request) override;
  MetricsGauges gauges() const override;

  pid_t worker_pid() const;
  int64_t restarts() const;

 private:
  struct InFlight {
    CompletionRequest request;
    std::shared_ptr<CompletionStream> stream;
    size_t delivered = 0;  // bytes of text its client has
    size_t seen = 0;       // bytes of text the current worker sent for it
    int deaths = 0;        // workers that died while it ran
    bool cancel_sent = false;
  };

  // Starts a worker and waits for its ready frame; false (the child reaped) where it died first.
  bool start_worker(bool first, std::string& why);
  void send(const nlohmann::json& message);  // under mutex_
  void reader_loop();
  void on_message(const nlohmann::json& message);
  // The worker's channel ended: reaps it, fails the request it killed twice, restarts, replays the rest.
  void recover();
  void stop_worker() noexcept;
  // Every quarter second: a worker that makes no progress on a running request is reported and killed.
  void watchdog_loop();
  void report_stall(double seconds);  // under mutex_

  const WorkerOptions options_;
  mutable std::mutex mutex_;
  std::map<uint64_t, InFlight> in_flight_;  // by id; the lowest runs (the worker runs them in order)
  uint64_t next_id_ = 1;
  int fd_ = -1;
  pid_t pid_ = -1;
  std::string state_ = "loading";
  int64_t restarts_ = 0;
  MetricsGauges last_gauges_;
  bool stopping_ = false;
  std::condition_variable stop_changed_;
  std::chrono::steady_clock::time_point last_frame_;  // when the worker last said anything
  std::thread reader_;
  std::thread watchdog_;
};

}  // namespace strata::server
