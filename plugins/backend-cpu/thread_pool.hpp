// Persistent worker threads for the ops' data parallelism. parallel_for cuts [0, n) into a few chunks per thread
// that the threads claim one at a time, the calling thread among them: a thread the system runs late (asleep, or
// its core taken by other work or by a hypervisor) finds the chunks done by the others instead of holding the job
// up, and unequal items (a causal prompt's later tokens) even out. Nothing is allocated per call. A decode step
// forks hundreds of small jobs, so both sides poll briefly before they sleep: idle workers after their last job,
// the caller for the chunks others have claimed; a job too small to share runs on the caller alone.
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
  // body(begin, end, worker): worker is in [0, size()), so it can index per-thread scratch. One thread may run
  // several chunks of a job, one after another, under its own worker number.
  using ChunkFn = void (*)(const void* body, int64_t begin, int64_t end, int worker);

  // Starts a thread that runs body, or throws std::system_error as std::thread's constructor does when the
  // system has no thread to give (a limit on processes or on memory for its stack). Tests pass one that fails.
  using ThreadStarter = std::function<std::thread(std::function<void()> body)>;

  // How long waits poll before they sleep by default (the backend option "poll_us" sets it): the ops of a step
  // follow each other within microseconds (a hybrid placement's pool waits for the GPU between layers for a few
  // hundred), while an idle pool soon costs no CPU.
  static constexpr std::chrono::microseconds kDefaultPoll{500};

  // Chunks per taking part thread: more even out late threads better, each costs one atomic claim.
  static constexpr int64_t kChunksPerThread = 4;

  // Starts n_threads - 1 workers. When one cannot start, joins those that did and throws sdk::Failure
  // naming n_threads and the system's reason. Waits poll for poll first (none where it is zero or the threads
  // outnumber the cores: a poller would take the core of the thread it waits for).
  explicit ThreadPool(int n_threads, std::chrono::microseconds poll = kDefaultPoll,
                      const ThreadStarter& start_thread = start_std_thread);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Pins worker w (1 .. size() - 1) to the logical CPU cpus[w % cpus.size()]; the caller's thread (worker 0) is
  // left as it is (it is the host's). Returns false where the system refused one (the others stay pinned).
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
  // Claims and runs the job's chunks until none is left.
  void run_chunks(int worker) noexcept;
  void worker_loop(int worker);
  // The published word of the next open job after seen's, or 0 once the pool stops.
  uint64_t wait_for_job(uint64_t seen);

  const std::chrono::microseconds poll_;  // how long waits poll first; zero: they sleep at once
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable job_ready_;
  std::condition_variable job_done_;
  // The current job; written by the caller while no worker visits (visitors_ is zero and the last job closed),
  // read by its visitors without the lock (the release store of published_ hands it over).
  const void* body_ = nullptr;
  ChunkFn chunk_fn_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;  // items per chunk
  uint64_t jobs_ = 0;
  // The job's number, whether it is closed (done: late workers must not enter) and its thread count (workers
  // 0 .. count - 1 take part), in one word.
  static constexpr int kThreadBits = 16;
  static constexpr uint64_t kThreadMask = (uint64_t{1} << kThreadBits) - 1;
  static constexpr uint64_t kClosed = uint64_t{1} << kThreadBits;
  static constexpr int kJobShift = kThreadBits + 1;
  std::atomic<uint64_t> published_{0};
  std::atomic<int> visitors_{0};        // workers inside the published job (reading its fields)
  std::atomic<int64_t> next_item_{0};   // the first item no thread has claimed
  std::atomic<int64_t> unfinished_{0};  // items not done yet
  bool stopping_ = false;
  std::exception_ptr first_error_;
};

}  // namespace strata::cpu
