// parallel_for when the system starts no more threads (a memory limit): a count the user chose fails naming it, the
// engine's own count runs the tasks on the threads that did start. The expert store's load, whose count is the
// engine's, used to end a command with "unexpected error: Resource temporarily unavailable" on a 16-core host
// under a memory limit.
#include "core/util/parallel.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/util/error.hpp"
#include "support/run_command.hpp"

namespace strata {
namespace {

constexpr const char* kNoAddressLimitUnderAsan =
    "AddressSanitizer build: an address-space limit cannot make threads fail to start";

// Caps this (death test's child) process's address space 4 MiB above what it maps now, below one thread's stack.
void leave_no_room_for_a_thread() {
  long pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  const rlim_t cap = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{4} << 20);
  const rlimit limit{cap, cap};
  if (setrlimit(RLIMIT_AS, &limit) != 0) std::_Exit(77);
}

constexpr uint64_t kTasks = 1000;
// More threads than glibc's cache of exited threads' stacks (40 MiB by default: five) can start without new memory.
constexpr unsigned kThreads = 64;

TEST(ParallelFor, ACountTheUserChoseFailsNamingItWhenNoThreadStarts) {
  if (test::kAddressSanitizer) GTEST_SKIP() << kNoAddressLimitUnderAsan;
  EXPECT_EXIT(
      {
        leave_no_room_for_a_thread();
        try {
          parallel_for(kTasks, kThreads, [](uint64_t, unsigned) {});
        } catch (const Error& error) {
          std::_Exit(std::string(error.what()).find("cannot start 64 worker threads") != std::string::npos ? 3 : 4);
        }
        std::_Exit(0);
      },
      testing::ExitedWithCode(3), "");
}

TEST(ParallelFor, TheEnginesOwnCountRunsEveryTaskOnTheThreadsThatStart) {
  if (test::kAddressSanitizer) GTEST_SKIP() << kNoAddressLimitUnderAsan;
  EXPECT_EXIT(
      {
        leave_no_room_for_a_thread();
        std::atomic<uint64_t> sum{0};
        std::atomic<unsigned> highest_worker{0};
        parallel_for(
            kTasks, kThreads,
            [&](uint64_t task, unsigned worker) {
              sum += task;
              unsigned seen = highest_worker;
              while (worker > seen && !highest_worker.compare_exchange_weak(seen, worker)) {
              }
            },
            ThreadShortage::run_fewer);
        // Every task once, and not on all the threads asked for: some could not start under the cap.
        std::_Exit(sum == kTasks * (kTasks - 1) / 2 && highest_worker < kThreads - 1 ? 3 : 4);
      },
      testing::ExitedWithCode(3), "");
}

}  // namespace
}  // namespace strata
