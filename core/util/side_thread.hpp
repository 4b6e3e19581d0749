// One job at a time on a thread of its own, so that its caller does other work meanwhile: a split layer's expert
// pool computes while the calling thread queues the device's part (copies, writes, launches). Both waits (the
// thread for a job, the caller for its end) poll briefly, then sleep: a decode step hands the thread a job every
// few hundred microseconds.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <thread>
#include <utility>

namespace strata {

class SideThread {
 public:
  // Waits poll for poll before they sleep.
  explicit SideThread(std::chrono::microseconds poll = std::chrono::microseconds(200));
  ~SideThread();
  SideThread(const SideThread&) = delete;
  SideThread& operator=(const SideThread&) = delete;

  // Runs job on the thread; the job before must have been waited for.
  void start(std::function<void()> job);
  // Returns when the job started last has ended; rethrows what it threw.
  void wait();

 private:
  void loop();

  const std::chrono::microseconds poll_;
  std::function<void()> job_;  // written by start before started_ moves on, read by the thread after
  std::exception_ptr error_;   // written by the thread before finished_ moves on, read by wait after
  std::atomic<uint64_t> started_{0};
  std::atomic<uint64_t> finished_{0};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// A job on a SideThread, waited for at the latest when this goes out of scope: the job may use its caller's
// locals, so an exception on the caller's side must not leave it running (what the job threw then is dropped: the
// caller's exception is the one that leaves).
class SideJob {
 public:
  SideJob(SideThread& thread, std::function<void()> job) : thread_(&thread) { thread.start(std::move(job)); }
  ~SideJob();
  SideJob(const SideJob&) = delete;
  SideJob& operator=(const SideJob&) = delete;

  // Returns when the job has ended; rethrows what it threw.
  void wait() { std::exchange(thread_, nullptr)->wait(); }

 private:
  SideThread* thread_;  // null once waited for
};

}  // namespace strata
