// Jinja2's tests (`x is defined`, `n is divisibleby 3`), including the operator aliases (`eq`, `==`).
#pragma once

#include <string_view>

#include "core/template/value.hpp"

namespace strata::jinja {

bool has_test(std::string_view name);
bool apply_test(std::string_view name, const Value& value, const CallArgs& args);

}  // namespace strata::jinja
