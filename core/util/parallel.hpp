// Runs tasks 0..n_tasks-1 on up to `threads` std::threads (the calling thread is worker 0), each taking the next
// task as it finishes one. The first exception a task throws is rethrown on the calling thread after all workers
// stop.
#pragma once

#include <cstdint>
#include <functional>

namespace strata {

// What a thread the system cannot start (a limit on processes or on memory for its stack) does to the call.
enum class ThreadShortage {
  fail,       // throws Error naming the count, and the started workers stop: the user chose it (--threads)
  run_fewer,  // the tasks run on the threads that did start: the count is the engine's own choice
};

// task(index, worker) with worker in 0..threads-1 (for per-worker scratch buffers).
void parallel_for(uint64_t n_tasks, unsigned threads, const std::function<void(uint64_t, unsigned)>& task,
                  ThreadShortage shortage = ThreadShortage::fail);

}  // namespace strata
