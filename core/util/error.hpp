// The one exception type of the core. Its message is meant for the user: it names the file, field or
// request at fault and says what is wrong.
#pragma once

#include <stdexcept>
#include <string>

namespace strata {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace strata
