#include "core/template/limits.hpp"

namespace strata::jinja {
namespace {

thread_local int64_t work_budget = 0;  // of the render in progress, for the message

}  // namespace

void fail_nesting() { throw RenderFailure("nested deeper than " + std::to_string(kMaxNesting) + " levels"); }

void fail_result_size(int64_t size) {
  throw RenderFailure("a result of " + std::to_string(size) + " items or bytes is past the limit of " +
                      std::to_string(kMaxResultSize));
}

void fail_work() {
  throw RenderFailure("the template built, copied or compared more than " + std::to_string(work_budget) +
                      " bytes of data (the work limit of one render)");
}

int64_t repeated_size(int64_t unit, int64_t count) {
  if (unit <= 0 || count <= 0) return 0;
  const __int128 product = __int128{unit} * count;  // cannot overflow, unlike the int64 product
  if (product > kMaxResultSize) {
    fail_result_size(product > std::numeric_limits<int64_t>::max() ? std::numeric_limits<int64_t>::max()
                                                                   : static_cast<int64_t>(product));
  }
  return static_cast<int64_t>(product);
}

WorkBudget::WorkBudget(int64_t max_work) : saved_left_(detail::work_left), saved_budget_(work_budget) {
  detail::work_left = max_work;
  work_budget = max_work;
}

WorkBudget::~WorkBudget() {
  detail::work_left = saved_left_;
  work_budget = saved_budget_;
}

}  // namespace strata::jinja
