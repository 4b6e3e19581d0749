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
  const int64_t at_least = std::max<int64_t>(min_per_thread, 1);
  const int threads = static_cast<int>(std::clamp<int64_t>(n / at_least, 1, size()));
  if (threads == 1) {
    chunk_fn(body, 0, n, 0);
    return;
  }
  // The last job is closed; a worker that woke late may still be checking it, and must leave before its fields
  // change (it only reads them: every claimed chunk is done).
  while (visitors_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  {
    std::lock_guard lock(mutex_);
    body_ = body;
    chunk_fn_ = chunk_fn;
    n_ = n;
    grain_ = std::max(at_least, (n + threads * kChunksPerThread - 1) / (threads * kChunksPerThread));
    next_item_.store(0, std::memory_order_relaxed);
    unfinished_.store(n, std::memory_order_relaxed);
    first_error_ = nullptr;
    ++jobs_;
    published_.store(jobs_ << kJobShift | static_cast<uint64_t>(threads), std::memory_order_release);
  }
  job_ready_.notify_all();
  run_chunks(0);
  const auto done = [this] { return unfinished_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(poll_, done)) {
    std::unique_lock lock(mutex_);
    // Terminates: every claimed chunk finishes (exceptions are caught) and counts down.
    job_done_.wait(lock, done);
  }
  published_.store(jobs_ << kJobShift | kClosed | static_cast<uint64_t>(threads), std::memory_order_seq_cst);
  std::exception_ptr error;
  {
    std::lock_guard lock(mutex_);
    error = first_error_;
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::run_chunks(int worker) noexcept {
  const int64_t n = n_, grain = grain_;
  for (;;) {
    const int64_t begin = next_item_.fetch_add(grain, std::memory_order_relaxed);
    if (begin >= n) return;
    const int64_t end = std::min(n, begin + grain);
    try {
      chunk_fn_(body_, begin, end, worker);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!first_error_) first_error_ = std::current_exception();
    }
    if (unfinished_.fetch_sub(end - begin, std::memory_order_acq_rel) == end - begin) {
      // Under the lock, so that a caller between its last check and its sleep cannot miss the wake-up.
      std::lock_guard lock(mutex_);
      job_done_.notify_one();
    }
  }
}

uint64_t ThreadPool::wait_for_job(uint64_t seen) {
  uint64_t job = seen;
  const auto next = [&] {
    job = published_.load(std::memory_order_acquire);
    return (job >> kJobShift) != (seen >> kJobShift) && (job & kClosed) == 0;
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
    // The job's thread count comes with it: a worker left out of a small job must not take its chunks.
    const int threads = static_cast<int>(seen & kThreadMask);
    if (worker >= threads) continue;
    // Entering, then checking that the job is still open, pairs with the caller closing it, then waiting for
    // the visitors to leave: either this worker sees it closed, or the caller sees this worker.
    visitors_.fetch_add(1, std::memory_order_seq_cst);
    if (published_.load(std::memory_order_seq_cst) == seen) run_chunks(worker);
    visitors_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace strata::cpu
