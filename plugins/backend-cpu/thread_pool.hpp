// Persistent worker threads for the ops' data parallelism. parallel_for splits [0, n) into one contiguous
// chunk per thread (static chunking: the same split for the same n, no work stealing, nothing allocated
// per call); the calling thread runs chunk 0 itself.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace strata::cpu {

class ThreadPool {
 public:
  // body(begin, end, worker): worker is in [0, size()), so it can index per-thread scratch.
  using ChunkFn = void (*)(const void* body, int64_t begin, int64_t end, int worker);

  // Starts a thread that runs body, or throws std::system_error as std::thread's constructor does when the
  // system has no thread to give (a limit on processes or on memory for its stack). Tests pass one that fails.
  using ThreadStarter = std::function<std::thread(std::function<void()> body)>;

  // Starts n_threads - 1 workers. When one cannot start, joins those that did and throws sdk::Failure
  // naming n_threads and the system's reason.
  explicit ThreadPool(int n_threads, const ThreadStarter& start_thread = start_std_thread);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs body over [0, n) on every thread and returns when all are done; rethrows the first exception
  // a chunk threw. Not reentrant: one parallel_for at a time per pool.
  template <class Body>
  void parallel_for(int64_t n, const Body& body) {
    static_assert(std::is_invocable_v<const Body&, int64_t, int64_t, int>);
    run(n, &body, [](const void* erased, int64_t begin, int64_t end, int worker) {
      (*static_cast<const Body*>(erased))(begin, end, worker);
    });
  }

 private:
  static std::thread start_std_thread(std::function<void()> body) { return std::thread(std::move(body)); }

  void run(int64_t n, const void* body, ChunkFn chunk_fn);
  void stop_workers() noexcept;
  void run_chunk(int worker) noexcept;
  void worker_loop(int worker);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable job_ready_;
  std::condition_variable job_done_;
  // The current job; written under mutex_ before generation_ moves on.
  const void* body_ = nullptr;
  ChunkFn chunk_fn_ = nullptr;
  int64_t n_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
  std::exception_ptr first_error_;
  std::atomic<uint64_t> published_generation_{0};  // read by spinning workers without the lock
};

}  // namespace strata::cpu
