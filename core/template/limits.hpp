// What a template may use. A chat template comes inside a model file, so it is untrusted input: past these
// limits a render (or a parse) fails with RenderFailure instead of exhausting the stack, the memory or the
// time of the process. Real chat templates stay orders of magnitude below them (docs/templates.md).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "core/template/failure.hpp"

namespace strata::jinja {

// Bytes of one string, items of one list or dict, bytes of the rendering.
inline constexpr int64_t kMaxResultSize = int64_t{1} << 24;

// Levels of nesting: blocks, expressions (each operator, filter, test, attribute, subscript and call is a
// level), macro calls, and data (lists and dicts inside each other, as printed, compared or converted).
// Every recursion of the engine counts its levels, so none can exhaust the stack.
inline constexpr int kMaxNesting = 200;

// The budgets of one render (RenderOptions' defaults): expressions evaluated, and work, the bytes of the
// strings, lists and dicts built, copied or compared (a list or dict item counts its size in memory, a
// new string its bytes plus kStringOverhead).
inline constexpr int64_t kDefaultMaxEvaluations = 10'000'000;
inline constexpr int64_t kDefaultMaxWork = int64_t{1} << 28;
inline constexpr int64_t kStringOverhead = 64;  // a string value's own memory: the string and its shared block

[[noreturn]] void fail_nesting();
[[noreturn]] void fail_result_size(int64_t size);
[[noreturn]] void fail_work();

namespace detail {
inline thread_local int nesting = 0;  // the levels in progress on this thread (renders do not share state)
inline thread_local int64_t work_left = std::numeric_limits<int64_t>::max();
}  // namespace detail

// Counts one level of nesting for its lifetime: of this thread's render by default, or of `depth` (the
// parser's own count). Past kMaxNesting it throws RenderFailure.
class NestingLevel {
 public:
  NestingLevel() : NestingLevel(detail::nesting) {}
  explicit NestingLevel(int& depth) : depth_(depth) {
    if (depth_ >= kMaxNesting) fail_nesting();
    ++depth_;
  }
  ~NestingLevel() { --depth_; }
  NestingLevel(const NestingLevel&) = delete;
  NestingLevel& operator=(const NestingLevel&) = delete;

 private:
  int& depth_;
};

inline void check_result_size(int64_t size) {
  if (size > kMaxResultSize) fail_result_size(size);
}

// count copies of something of `unit` bytes or items: fails past kMaxResultSize before the product could
// overflow. Returns the product.
int64_t repeated_size(int64_t unit, int64_t count);

// out += piece, failing when out would grow past kMaxResultSize.
inline void append_bounded(std::string& out, std::string_view piece) {
  check_result_size(static_cast<int64_t>(out.size() + piece.size()));
  out += piece;
}

// Charges bytes of work to this thread's render; past its budget it throws RenderFailure. Outside of a
// render nothing is counted against anything.
inline void charge_work(int64_t bytes) {
  detail::work_left -= bytes;
  if (detail::work_left < 0) fail_work();
}

// The budget of the render in progress on this thread, for the lifetime of the object.
class WorkBudget {
 public:
  explicit WorkBudget(int64_t max_work);
  ~WorkBudget();
  WorkBudget(const WorkBudget&) = delete;
  WorkBudget& operator=(const WorkBudget&) = delete;

 private:
  int64_t saved_left_;
  int64_t saved_budget_;
};

}  // namespace strata::jinja
