// A rendering failure before it knows where in the template it happened. The evaluator turns it into a
// strata::Error that names the template line of the expression or statement at fault.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace strata::jinja {

class RenderFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What one operation may produce (characters of a string, items of a list): chat templates stay far
// below it, and a template from a model file cannot make a server allocate without bound.
inline constexpr int64_t kMaxResultSize = int64_t{1} << 24;

// How deep blocks, expressions and macro calls may nest: recursion is bounded by it, so a template cannot
// exhaust the stack (real chat templates nest a handful of levels).
inline constexpr int kMaxNesting = 200;

// Counts one level of nesting for its lifetime; past kMaxNesting it throws RenderFailure.
class NestingLevel {
 public:
  explicit NestingLevel(int& depth) : depth_(depth) {
    if (++depth_ > kMaxNesting) {
      --depth_;
      throw RenderFailure("nested deeper than " + std::to_string(kMaxNesting) + " levels");
    }
  }
  ~NestingLevel() { --depth_; }
  NestingLevel(const NestingLevel&) = delete;
  NestingLevel& operator=(const NestingLevel&) = delete;

 private:
  int& depth_;
};

inline void check_result_size(int64_t size) {
  if (size > kMaxResultSize) {
    throw RenderFailure("a result of " + std::to_string(size) + " items or characters is past the limit of " +
                        std::to_string(kMaxResultSize));
  }
}

}  // namespace strata::jinja
