#include "thread_pool.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "strata/plugin.hpp"

namespace strata::cpu {
namespace {

constexpr int kPausesPerClockRead = 64;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Polls done() for poll (not at all where it is zero). Returns whether done() held.
template <class Done>
bool spin_until(std::chrono::microseconds poll, const Done& done) {
  if (poll.count() <= 0) return done();
  const auto deadline = std::chrono::steady_clock::now() + poll;
  for (;;) {
    for (int pause = 0; pause < kPausesPerClockRead; ++pause) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
    // A thread being waited for may be runnable on this core (the system's other load moved it here).
    std::this_thread::yield();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads, std::chrono::microseconds poll, const ThreadStarter& start_thread)
    : poll_(n_threads <= static_cast<int>(std::thread::hardware_concurrency()) ? poll : std::chrono::microseconds(0)) {
  const int extra = n_threads > 1 ? n_threads - 1 : 0;
  workers_.reserve(extra);
  for (int worker = 1; worker <= extra; ++worker) {
    try {
      workers_.push_back(start_thread([this, worker] { worker_loop(worker); }));
    } catch (const std::exception& error) {  // std::system_error, or bad_alloc for the thread's state
      // No destructor runs for a constructor that throws: the started workers must be stopped here, or their
      // joinable std::threads would terminate the process.
      stop_workers();
      throw sdk::Failure(STRATA_E_UNSUPPORTED, "cannot start " + std::to_string(n_threads) + " threads: thread " +
                                                   std::to_string(worker + 1) + " failed (" + error.what() +
                                                   "); ask for fewer threads");
    }
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

bool ThreadPool::pin_workers(const std::vector<int>& cpus) {
  if (cpus.empty()) return false;
  bool all = true;
  for (size_t w = 1; w <= workers_.size(); ++w) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[w % cpus.size()], &one);
    all = pthread_setaffinity_np(workers_[w - 1].native_handle(), sizeof(one), &one) == 0 && all;
  }
  return all;
}

void ThreadPool::stop_workers() noexcept {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  job_ready_.notify_all();
  for (auto& thread : workers_) thread.join();
}

void ThreadPool::run(int64_t n, int64_t min_per_thread, const void* body, ChunkFn chunk_fn) {
  if (n <= 0) return;
  const int64_t shares = n / std::max<int64_t>(min_per_thread, 1);
  const int threads = static_cast<int>(std::clamp<int64_t>(shares, 1, size()));
  if (threads == 1) {
    chunk_fn(body, 0, n, 0);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    body_ = body;
    chunk_fn_ = chunk_fn;
    n_ = n;
    first_error_ = nullptr;
    pending_.store(threads - 1, std::memory_order_relaxed);
    ++jobs_;
    published_.store(jobs_ << kThreadBits | static_cast<uint64_t>(threads), std::memory_order_release);
  }
  job_ready_.notify_all();
  run_chunk(0, threads);
  if (!spin_until(poll_, [this] { return pending_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock lock(mutex_);
    // Terminates: every worker of the job finishes its chunk (exceptions are caught) and then counts down.
    job_done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  std::exception_ptr error;
  {
    std::lock_guard lock(mutex_);
    error = first_error_;
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::run_chunk(int worker, int threads) noexcept {
  const int64_t begin = n_ * worker / threads;
  const int64_t end = n_ * (worker + 1) / threads;
  if (begin == end) return;
  try {
    chunk_fn_(body_, begin, end, worker);
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (!first_error_) first_error_ = std::current_exception();
  }
}

uint64_t ThreadPool::wait_for_job(uint64_t seen) {
  uint64_t job = seen;
  const auto next = [&] {
    job = published_.load(std::memory_order_acquire);
    return job != seen;
  };
  if (spin_until(poll_, next)) return job;
  std::unique_lock lock(mutex_);
  job_ready_.wait(lock, [&] { return stopping_ || next(); });
  return stopping_ ? 0 : job;
}

void ThreadPool::worker_loop(int worker) {
  uint64_t seen = 0;
  for (;;) {
    seen = wait_for_job(seen);
    if (seen == 0) return;
    // The job's thread count comes with it: a worker left out of a small job must not read the next one's.
    const int threads = static_cast<int>(seen & kThreadMask);
    if (worker >= threads) continue;
    run_chunk(worker, threads);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Under the lock, so that a caller between its last check and its sleep cannot miss the wake-up.
      std::lock_guard lock(mutex_);
      job_done_.notify_one();
    }
  }
}

}  // namespace strata::cpu
