#include "core/util/side_thread.hpp"

#include <stdexcept>

namespace strata {
namespace {

// Until value differs from seen: polls for poll, then sleeps on the atomic (woken by notify_all).
uint64_t wait_past(const std::atomic<uint64_t>& value, uint64_t seen, std::chrono::microseconds poll) {
  const auto deadline = std::chrono::steady_clock::now() + poll;
  for (int spins = 0;; ++spins) {
    if (const uint64_t now = value.load(std::memory_order_acquire); now != seen) return now;
    if (spins % 64 == 63 && std::chrono::steady_clock::now() >= deadline) break;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  value.wait(seen, std::memory_order_acquire);
  return value.load(std::memory_order_acquire);
}

}  // namespace

SideThread::SideThread(std::chrono::microseconds poll) : poll_(poll), thread_([this] { loop(); }) {}

SideThread::~SideThread() {
  stopping_.store(true, std::memory_order_relaxed);
  started_.fetch_add(1, std::memory_order_release);
  started_.notify_all();
  thread_.join();
}

void SideThread::start(std::function<void()> job) {
  if (started_.load(std::memory_order_relaxed) != finished_.load(std::memory_order_acquire)) {
    throw std::logic_error("SideThread::start: the job before was not waited for");
  }
  job_ = std::move(job);
  error_ = nullptr;
  started_.fetch_add(1, std::memory_order_release);
  started_.notify_all();
}

void SideThread::wait() {
  const uint64_t target = started_.load(std::memory_order_relaxed);
  uint64_t done = finished_.load(std::memory_order_acquire);
  while (done != target) done = wait_past(finished_, done, poll_);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void SideThread::loop() {
  uint64_t seen = 0;
  for (;;) {
    seen = wait_past(started_, seen, poll_);
    if (stopping_.load(std::memory_order_relaxed)) return;
    try {
      job_();
    } catch (...) {
      error_ = std::current_exception();
    }
    finished_.store(seen, std::memory_order_release);
    finished_.notify_all();
  }
}

SideJob::~SideJob() {
  if (thread_ == nullptr) return;
  try {
    thread_->wait();
  } catch (...) {  // NOLINT(bugprone-empty-catch): the caller's own exception is unwinding
  }
}

}  // namespace strata
