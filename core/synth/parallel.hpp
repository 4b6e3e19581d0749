// Runs tasks 0..n_tasks-1 on up to `threads` std::threads, each taking the next task as it finishes one.
// The first exception a task throws is rethrown on the calling thread after all workers stop.
#pragma once

#include <cstdint>
#include <functional>

namespace strata::synth {

// task(index, worker) with worker in 0..threads-1 (for per-worker scratch buffers).
void parallel_for(uint64_t n_tasks, unsigned threads, const std::function<void(uint64_t, unsigned)>& task);

}  // namespace strata::synth
