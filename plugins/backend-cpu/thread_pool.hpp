// Persistent worker threads for the ops' data parallelism. parallel_for splits [0, n) into one contiguous
// chunk per thread (static chunking: the same split for the same n, no work stealing, nothing allocated
// per call); the calling thread runs chunk 0 itself. A decode step forks hundreds of small jobs, so both sides
// poll briefly before they sleep: idle workers after their last job, the caller for its workers'
// chunks; a job too small to share runs on the caller alone.
#pragma once

#include <atomic>
#include <chrono>
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

  // How long waits poll before they sleep by default (the backend option "poll_us" sets it): the ops of a step
  // follow each other within microseconds (a hybrid placement's pool waits for the GPU between layers for a few
  // hundred), while an idle pool soon costs no CPU.
  static constexpr std::chrono::microseconds kDefaultPoll{500};

  // Starts n_threads - 1 workers. When one cannot start, joins those that did and throws sdk::Failure
  // naming n_threads and the system's reason. Waits poll for poll first (none where it is zero or the threads
  // outnumber the cores: a poller would take the core of the thread it waits for).
  explicit ThreadPool(int n_threads, std::chrono::microseconds poll = kDefaultPoll,
                      const ThreadStarter& start_thread = start_std_thread);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Pins worker w (1 .. size() - 1) to the logical CPU cpus[w % cpus.size()]; the caller's thread, which runs
  // chunk 0, is left as it is (it is the host's). Returns false where the system refused one (the others stay
  // pinned).
  bool pin_workers(const std::vector<int>& cpus);

  // Runs body over [0, n) and returns when all chunks are done; rethrows the first exception a chunk threw. A
  // chunk has at least min_per_thread items (fewer threads take part when n is small: waking a thread costs
  // more than a few rows of work). Not reentrant: one parallel_for at a time per pool.
  template <class Body>
  void parallel_for(int64_t n, const Body& body, int64_t min_per_thread = 1) {
    static_assert(std::is_invocable_v<const Body&, int64_t, int64_t, int>);
    run(n, min_per_thread, &body, [](const void* erased, int64_t begin, int64_t end, int worker) {
      (*static_cast<const Body*>(erased))(begin, end, worker);
    });
  }

 private:
  static std::thread start_std_thread(std::function<void()> body) { return std::thread(std::move(body)); }

  void run(int64_t n, int64_t min_per_thread, const void* body, ChunkFn chunk_fn);
  void stop_workers() noexcept;
  void run_chunk(int worker, int threads) noexcept;
  void worker_loop(int worker);
  // The generation of the next job after seen, or 0 once the pool stops.
  uint64_t wait_for_job(uint64_t seen);

  const std::chrono::microseconds poll_;  // how long waits poll first; zero: they sleep at once
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable job_ready_;
  std::condition_variable job_done_;
  // The current job; written under mutex_ before published_ moves on, read by its workers without the lock
  // (the release store of published_ hands it over; the caller writes the next only after they count down).
  const void* body_ = nullptr;
  ChunkFn chunk_fn_ = nullptr;
  int64_t n_ = 0;
  uint64_t jobs_ = 0;
  // The job's number and its thread count (the caller's chunk and workers 1 .. count - 1) in one word.
  static constexpr int kThreadBits = 16;
  static constexpr uint64_t kThreadMask = (uint64_t{1} << kThreadBits) - 1;
  std::atomic<uint64_t> published_{0};
  std::atomic<int> pending_{0};  // workers of the job not done yet
  bool stopping_ = false;
  std::exception_ptr first_error_;
};

}  // namespace strata::cpu
