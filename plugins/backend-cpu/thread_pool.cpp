#include "thread_pool.hpp"

#include <string>

#include "strata/plugin.hpp"

namespace strata::cpu {
namespace {

// A worker polls briefly for the next job before sleeping: consecutive ops (a decode step issues hundreds)
// then start without a futex wake-up, while an idle pool still costs no CPU.
constexpr int kSpinIterations = 4000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int n_threads, const ThreadStarter& start_thread) {
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

void ThreadPool::stop_workers() noexcept {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  job_ready_.notify_all();
  for (auto& thread : workers_) thread.join();
}

void ThreadPool::run(int64_t n, const void* body, ChunkFn chunk_fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    chunk_fn(body, 0, n, 0);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    body_ = body;
    chunk_fn_ = chunk_fn;
    n_ = n;
    pending_ = static_cast<int>(workers_.size());
    first_error_ = nullptr;
    published_generation_.store(++generation_, std::memory_order_release);
  }
  job_ready_.notify_all();
  run_chunk(0);
  std::exception_ptr error;
  {
    std::unique_lock lock(mutex_);
    // Terminates: every worker finishes its chunk (exceptions are caught) and then counts down.
    job_done_.wait(lock, [this] { return pending_ == 0; });
    error = first_error_;
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::run_chunk(int worker) noexcept {
  const int64_t threads = size();
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

void ThreadPool::worker_loop(int worker) {
  uint64_t seen = 0;
  for (;;) {
    for (int spin = 0; spin < kSpinIterations && published_generation_.load(std::memory_order_acquire) == seen;
         ++spin) {
      cpu_relax();
    }
    {
      std::unique_lock lock(mutex_);
      job_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    run_chunk(worker);
    bool last;
    {
      std::lock_guard lock(mutex_);
      last = --pending_ == 0;
    }
    if (last) job_done_.notify_one();
  }
}

}  // namespace strata::cpu
