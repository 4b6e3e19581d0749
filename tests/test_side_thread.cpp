// core/util/side_thread.hpp: a job runs beside its caller, its exception reaches the caller, and a job is never
// left running past the scope that started it.
#include "core/util/side_thread.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

namespace strata {
namespace {

TEST(SideThread, RunsEachJobOnAnotherThreadWhileTheCallerWorks) {
  SideThread side(std::chrono::microseconds(0));  // no polling: the sleeping waits are tested too
  for (int round = 0; round < 100; ++round) {
    std::atomic<bool> caller_done{false};
    std::thread::id ran_on;
    bool saw_caller_done = false;
    side.start([&] {
      ran_on = std::this_thread::get_id();
      while (!caller_done.load()) std::this_thread::yield();  // ends only once the caller has worked beside it
      saw_caller_done = true;
    });
    caller_done.store(true);
    side.wait();
    EXPECT_NE(ran_on, std::this_thread::get_id());
    EXPECT_TRUE(saw_caller_done);
  }
}

TEST(SideThread, WaitRethrowsWhatTheJobThrewAndTheThreadGoesOn) {
  SideThread side;
  side.start([] { throw std::runtime_error("pool failed"); });
  EXPECT_THROW(
      {
        try {
          side.wait();
        } catch (const std::runtime_error& error) {
          EXPECT_STREQ(error.what(), "pool failed");
          throw;
        }
      },
      std::runtime_error);
  int value = 0;
  side.start([&] { value = 7; });
  side.wait();
  EXPECT_EQ(value, 7);
}

TEST(SideThread, AJobIsNotStartedBeforeTheOneBeforeIsWaitedFor) {
  SideThread side;
  std::atomic<bool> release{false};
  side.start([&] {
    while (!release.load()) std::this_thread::yield();
  });
  EXPECT_THROW(side.start([] {}), std::logic_error);
  release.store(true);
  side.wait();
}

TEST(SideJob, WaitsForItsJobWhenTheCallerLeavesByAnException) {
  SideThread side;
  std::atomic<bool> finished{false};
  try {
    SideJob job(side, [&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      finished.store(true);
      throw std::runtime_error("dropped: the caller's own error leaves");
    });
    throw std::invalid_argument("caller failed");
  } catch (const std::invalid_argument&) {
    EXPECT_TRUE(finished.load());  // the job's locals were still alive while it ran
  }
  side.start([] {});  // and the thread takes the next job
  side.wait();
}

}  // namespace
}  // namespace strata
