// Python's json.dumps over template values, as Hugging Face's `tojson` filter calls it: non-ASCII kept
// unless ensure_ascii, separators ", " and ": " (or "," and ": " with an indent), floats as Python
// prints them.
#pragma once

#include <optional>
#include <string>

#include "core/template/value.hpp"

namespace strata::jinja {

struct JsonStyle {
  std::optional<std::string> indent;  // None: one line
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

std::string to_python_json(const Value& value, const JsonStyle& style);

}  // namespace strata::jinja
