// The message of a strata::Error, for tests that check it.
#pragma once

#include <string>

#include "core/util/error.hpp"

namespace strata::test {

// The message f throws as strata::Error, or "" when it throws nothing.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

}  // namespace strata::test
