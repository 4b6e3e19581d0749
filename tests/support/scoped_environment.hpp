// An environment variable set (or unset) for one scope, for tests of STRATA_* knobs.
#pragma once

#include <cstdlib>
#include <string>

namespace strata::test {

// Sets name to value (nullptr: unsets it) and puts back what was there when the scope ends.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    const char* outer = std::getenv(name);
    had_value_ = outer != nullptr;
    if (had_value_) saved_ = outer;
    set(value);
  }
  ~ScopedEnvironment() { set(had_value_ ? saved_.c_str() : nullptr); }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

  void set(const char* value) {
    if (value != nullptr) {
      setenv(name_, value, 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string saved_;
  bool had_value_ = false;
};

}  // namespace strata::test
