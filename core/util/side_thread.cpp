#include "core/util/side_thread.hpp"

#include <stdexcept>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace strata {

namespace {
void pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}
}  // namespace

SideThread::SideThread(std::chrono::microseconds poll) : poll_(poll), thread_([this] { loop(); }) {}

SideThread::~SideThread() {
  finish();
  state_.store(stopping, std::memory_order_release);
  state_.notify_one();
  thread_.join();
}

void SideThread::start(std::function<void()> job) {
  if (busy_) throw std::logic_error("SideThread::start: the job before was not waited for");
  job_ = std::move(job);
  busy_ = true;
  state_.store(queued, std::memory_order_release);
  state_.notify_one();
}

void SideThread::wait() {
  if (!busy_) return;
  await_change(queued);
  busy_ = false;
  job_ = nullptr;
  state_.store(idle, std::memory_order_relaxed);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void SideThread::finish() noexcept {
  try {
    wait();
  } catch (...) {  // the caller's error is the one it reports
  }
}

void SideThread::loop() {
  uint32_t state = idle;
  for (;;) {
    while (state != queued && state != stopping) state = await_change(state);
    if (state == stopping) return;
    try {
      job_();
    } catch (...) {
      error_ = std::current_exception();
    }
    state_.store(done, std::memory_order_release);
    state_.notify_one();
    state = done;
  }
}

uint32_t SideThread::await_change(uint32_t from) const {
  const auto until = std::chrono::steady_clock::now() + poll_;
  for (int spins = 0;; ++spins) {
    const uint32_t now = state_.load(std::memory_order_acquire);
    if (now != from) return now;
    if ((spins & 63) == 63 && std::chrono::steady_clock::now() >= until) break;
    pause();
  }
  state_.wait(from, std::memory_order_acquire);
  return state_.load(std::memory_order_acquire);
}

}  // namespace strata
