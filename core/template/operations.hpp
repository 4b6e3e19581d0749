// Python's operators and Jinja2's attribute and item lookup on template values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/template/value.hpp"

namespace strata::jinja {

// `object.name` (name a string): a method of str/dict/list first, then the dict key (Jinja2's getattr order).
Value get_attribute(const Value& object, const Value& name);
// `object[key]`: the item first, then for string keys the attribute (Jinja2's getitem order).
Value get_item(const Value& object, const Value& key);
// `object[start:stop:step]` on lists, tuples and strings; null values are omitted bounds.
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step);

// + - * / // % ** ~ == != < <= > >= in "not in"
Value binary_operation(std::string_view op, const Value& left, const Value& right);
Value unary_operation(std::string_view op, const Value& operand);  // "-" or "+"
bool contains(const Value& container, const Value& item);

// Integer arithmetic in 64 bits that fails the render on overflow, where Python's unbounded integers
// would grow; and Python's int(float), which fails for NaN, infinities and values past 64 bits.
int64_t checked_integer(std::string_view op, int64_t left, int64_t right);  // op: + - * // % **
int64_t checked_negate(int64_t value);
[[noreturn]] void fail_overflow();
int64_t float_to_integer(double value);

// What a for loop visits: list and tuple items, dict keys, string characters; nothing for undefined.
std::vector<Value> iterate(const Value& iterable);
size_t length(const Value& value);  // Python's len()

// Throws the error Jinja2 raises when an undefined value is used where that is not allowed.
[[noreturn]] void fail_undefined(const Value& undefined);
// Jinja2's description of an object in undefined hints: "'dict object'", "None".
std::string object_description(const Value& object);

}  // namespace strata::jinja
