// One thread of its own that runs a job beside the caller, which later waits for it: a hybrid placement's expert
// pool computes there while the caller queues the device's part of the layer. A layer's job takes about a hundred
// microseconds and waking a sleeping thread tens, so both sides poll for a while before they sleep.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <thread>

namespace strata {

class SideThread {
 public:
  // Starts the thread (throws std::system_error where the system has none to give). Waits poll for poll first.
  explicit SideThread(std::chrono::microseconds poll);
  ~SideThread();  // after the job in flight, if any, has run
  SideThread(const SideThread&) = delete;
  SideThread& operator=(const SideThread&) = delete;

  // Hands job to the thread and returns at once. One job at a time: the one before must have been waited for.
  void start(std::function<void()> job);
  // Returns once the job has run; rethrows what it threw.
  void wait();
  // wait() for a caller already unwinding an error of its own: what the job threw is dropped.
  void finish() noexcept;

 private:
  enum State : uint32_t { idle, queued, done, stopping };
  void loop();
  // The state once it is no longer from: polls, then sleeps.
  uint32_t await_change(uint32_t from) const;

  const std::chrono::microseconds poll_;
  std::atomic<uint32_t> state_{idle};
  std::function<void()> job_;  // written before state_ becomes queued, read by the thread after
  std::exception_ptr error_;   // written by the thread before state_ becomes done
  bool busy_ = false;          // the caller's: a job started and not waited for
  std::thread thread_;
};

}  // namespace strata
