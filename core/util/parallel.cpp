#include "core/util/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/util/error.hpp"

namespace strata {

void parallel_for(uint64_t n_tasks, unsigned threads, const std::function<void(uint64_t, unsigned)>& task,
                  ThreadShortage shortage) {
  const unsigned workers = static_cast<unsigned>(std::clamp<uint64_t>(n_tasks, 1, std::max(1u, threads)));
  if (workers == 1) {
    for (uint64_t i = 0; i < n_tasks; ++i) task(i, 0);
    return;
  }
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto work = [&](unsigned worker) {
    for (uint64_t i = next++; i < n_tasks && !failed; i = next++) {
      try {
        task(i, worker);
      } catch (...) {
        const std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  {
    std::vector<std::jthread> pool;
    for (unsigned w = 1; w < workers && !failed; ++w) {
      try {
        pool.emplace_back(work, w);
      } catch (const std::exception& e) {  // std::system_error: no thread to give (process or memory limits)
        if (shortage == ThreadShortage::run_fewer) break;
        const std::lock_guard lock(error_mutex);
        if (!error) {
          error = std::make_exception_ptr(Error("cannot start " + std::to_string(workers) + " worker threads: thread " +
                                                std::to_string(w + 1) + " failed (" + e.what() + "); ask for fewer"));
        }
        failed = true;  // the started workers stop after their current task
      }
    }
    work(0);
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace strata
