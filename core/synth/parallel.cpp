#include "core/synth/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace strata::synth {

void parallel_for(uint64_t n_tasks, unsigned threads, const std::function<void(uint64_t, unsigned)>& task) {
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
    for (unsigned w = 1; w < workers; ++w) pool.emplace_back(work, w);
    work(0);
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace strata::synth
