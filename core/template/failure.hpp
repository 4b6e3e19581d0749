// A rendering failure before it knows where in the template it happened. The evaluator turns it into a
// strata::Error that names the template line of the expression or statement at fault.
#pragma once

#include <stdexcept>

namespace strata::jinja {

class RenderFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace strata::jinja
