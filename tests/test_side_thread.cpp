// SideThread (core/util/side_thread.hpp): jobs run one at a time beside the caller and are done when wait returns;
// a job's exception comes back from wait and the thread goes on; a job still running when it goes is waited for.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "core/util/side_thread.hpp"

namespace strata {
namespace {

TEST(SideThread, RunsEachJobBesideTheCallerAndIsDoneWhenWaitReturns) {
  for (const auto poll : {std::chrono::microseconds(0), std::chrono::microseconds(500)}) {
    SideThread side(poll);
    const std::thread::id caller = std::this_thread::get_id();
    int64_t sum = 0;
    for (int job = 1; job <= 200; ++job) {
      std::thread::id ran_on;
      side.start([&, job] {
        ran_on = std::this_thread::get_id();
        sum += job;
      });
      side.wait();
      EXPECT_NE(ran_on, caller);
      ASSERT_EQ(sum, int64_t{job} * (job + 1) / 2) << "poll " << poll.count() << " us";
    }
    side.wait();  // nothing in flight: returns at once
  }
}

TEST(SideThread, AJobsErrorComesBackFromWaitAndTheThreadGoesOn) {
  SideThread side(std::chrono::microseconds(100));
  side.start([] { throw std::runtime_error("the pool failed"); });
  EXPECT_THROW(
      {
        try {
          side.wait();
        } catch (const std::runtime_error& error) {
          EXPECT_STREQ(error.what(), "the pool failed");
          throw;
        }
      },
      std::runtime_error);
  bool ran = false;
  side.start([&] { ran = true; });
  side.wait();
  EXPECT_TRUE(ran);
  side.start([] { throw std::runtime_error("dropped"); });
  side.finish();  // noexcept: the caller's own error wins
  EXPECT_THROW(side.start([] {}); side.start([] {}), std::logic_error) << "one job at a time";
  side.wait();
}

TEST(SideThread, AJobInFlightIsWaitedForWhenTheThreadGoes) {
  std::atomic<bool> finished = false;
  {
    SideThread side(std::chrono::microseconds(0));
    side.start([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      finished = true;
    });
  }
  EXPECT_TRUE(finished);
}

}  // namespace
}  // namespace strata
