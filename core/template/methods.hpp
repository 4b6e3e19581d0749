// Methods that templates call on values (`text.strip()`, `message.get('x')`), with Python's behaviour,
// and the string functions the filters share with them. Methods that would modify a value are absent,
// as in Hugging Face's immutable sandbox.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/template/value.hpp"

namespace strata::jinja {

// The method `name` of `object` bound to it, or nothing when the type has no such method.
std::optional<Value> bound_method(const Value& object, const std::string& name);

// Python's str.strip / lstrip / rstrip; `chars` null means whitespace.
std::string python_strip(const std::string& text, const Value& chars, bool left, bool right);
// Python's islower / isupper: some cased character, and none of the other case.
bool python_is_single_case(const std::string& text, bool upper);
std::string python_upper(std::string text);
std::string python_lower(std::string text);
std::string python_capitalize(const std::string& text);
std::string python_replace(const std::string& text, const std::string& old, const std::string& replacement,
                           int64_t count);

}  // namespace strata::jinja
