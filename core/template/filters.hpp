// Jinja2's built-in filters (`value | name(args)`) with Hugging Face's `tojson` in place of Jinja2's.
#pragma once

#include <string_view>

#include "core/template/value.hpp"

namespace strata::jinja {

bool has_filter(std::string_view name);
Value apply_filter(std::string_view name, const Value& input, const CallArgs& args);

}  // namespace strata::jinja
