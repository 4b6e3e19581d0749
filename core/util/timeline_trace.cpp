#include "core/util/timeline_trace.hpp"

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

namespace strata {

TimelineTrace::TimelineTrace(std::filesystem::path path) : file_(std::move(path), "the timeline trace") {}

void TimelineTrace::span(const char* lane, const char* name, Clock::time_point start, int32_t layer) {
  const auto end = Clock::now();
  const auto ns = [this](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin_).count();
  };
  const std::lock_guard lock(mutex_);
  if (events_.size() >= kMaxEvents) {
    ++dropped_;
    return;
  }
  events_.push_back({lane, name, ns(start), ns(end), layer});
}

void TimelineTrace::finish() {
  const std::lock_guard lock(mutex_);
  // Lanes become threads of one process, numbered in order of first appearance, named by metadata events.
  std::vector<const char*> lanes;
  const auto lane_id = [&lanes](const char* lane) {
    for (size_t i = 0; i < lanes.size(); ++i) {
      if (std::strcmp(lanes[i], lane) == 0) return static_cast<int64_t>(i + 1);
    }
    lanes.push_back(lane);
    return static_cast<int64_t>(lanes.size());
  };
  nlohmann::json events = nlohmann::json::array();
  for (const Event& event : events_) {
    events.push_back({{"name", event.name},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", lane_id(event.lane)},
                      {"ts", static_cast<double>(event.start_ns) / 1e3},
                      {"dur", static_cast<double>(event.end_ns - event.start_ns) / 1e3},
                      {"args", {{"layer", event.layer}}}});
  }
  for (size_t i = 0; i < lanes.size(); ++i) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 1},
                      {"tid", static_cast<int64_t>(i + 1)},
                      {"args", {{"name", lanes[i]}}}});
  }
  const nlohmann::json document = {
      {"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}, {"otherData", {{"dropped_spans", dropped_}}}};
  const std::string text = document.dump();
  file_.write(text.data(), text.size());
  file_.finish();
}

}  // namespace strata
