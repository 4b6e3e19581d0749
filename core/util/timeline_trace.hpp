// A timeline of host-side work in the Trace Event Format's JSON (open it in ui.perfetto.dev or chrome://tracing):
// spans on named lanes, one lane a thread. The hybrid placement records its split layers' routing reads, splits,
// queueing and pool runs into one (--trace-experts), which shows where a decode step's time goes and what runs
// beside what.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <vector>

#include "core/util/output_file.hpp"

namespace strata {

class TimelineTrace {
 public:
  using Clock = std::chrono::steady_clock;
  // Opens path now (throws strata::Error naming it), so that a path that cannot be written fails before the work.
  explicit TimelineTrace(std::filesystem::path path);

  // A span from start to now on lane (the thread's part, e.g. "caller" or "pool"), named name, for layer. lane and
  // name are kept by pointer: string literals. Thread-safe. Past kMaxEvents, spans are counted, not kept.
  void span(const char* lane, const char* name, Clock::time_point start, int32_t layer);
  // Writes the spans and closes the file; throws strata::Error where it cannot.
  void finish();

  static constexpr size_t kMaxEvents = size_t{1} << 20;  // 32 MiB of spans, about 4,000 decode steps of 48 layers

 private:
  struct Event {
    const char* lane;
    const char* name;
    int64_t start_ns, end_ns;
    int32_t layer;
  };
  std::mutex mutex_;
  std::vector<Event> events_;
  int64_t dropped_ = 0;
  OutputFile file_;
  const Clock::time_point origin_ = Clock::now();
};

}  // namespace strata
