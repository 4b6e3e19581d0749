#include "core/template/value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/template/limits.hpp"

namespace strata::jinja {

Value::Value(std::string value) {
  charge_work(static_cast<int64_t>(value.size() + kStringOverhead));
  storage_ = std::make_shared<const std::string>(std::move(value));
}

Value Value::list(std::vector<Value> items) {
  charge_work(static_cast<int64_t>(items.size() * sizeof(Value)));
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  return Value(Storage(std::move(data)));
}

Value Value::tuple(std::vector<Value> items) {
  Value value = list(std::move(items));
  value.list_data().is_tuple = true;
  return value;
}

Value Value::dict() { return Value(Storage(std::make_shared<DictData>())); }

namespace {

thread_local std::vector<std::weak_ptr<DictData>>* recorded_namespaces = nullptr;

}  // namespace

Value Value::namespace_object() {
  auto data = std::make_shared<DictData>();
  data->is_namespace = true;
  if (recorded_namespaces) {
    charge_work(sizeof(std::weak_ptr<DictData>));
    recorded_namespaces->push_back(data);
  }
  return Value(Storage(std::move(data)));
}

NamespaceRecord::NamespaceRecord() : saved_(recorded_namespaces) { recorded_namespaces = &namespaces_; }

NamespaceRecord::~NamespaceRecord() {
  recorded_namespaces = saved_;
  for (const auto& recorded : namespaces_) {
    if (const auto data = recorded.lock()) {
      const auto entries = std::move(data->entries);  // freed here, ending any cycle through this namespace
      data->entries.clear();
    }
  }
}

Value Value::function(std::string name, std::function<Value(const CallArgs&)> call) {
  return Value(Storage(std::make_shared<Function>(Function{std::move(name), std::move(call)})));
}

Value Value::from_json(const nlohmann::ordered_json& json) {
  const NestingLevel level;
  switch (json.type()) {
    case nlohmann::json::value_t::null:
      return nullptr;
    case nlohmann::json::value_t::boolean:
      return json.get<bool>();
    case nlohmann::json::value_t::number_integer:
      return json.get<int64_t>();
    case nlohmann::json::value_t::number_unsigned:
      if (json.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        throw RenderFailure("integer " + json.dump() + " is past the 64-bit range");
      }
      return json.get<int64_t>();
    case nlohmann::json::value_t::number_float:
      return json.get<double>();
    case nlohmann::json::value_t::string:
      return json.get<std::string>();
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      for (const auto& item : json) items.push_back(from_json(item));
      return list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Value object = dict();
      // The keys of a JSON object are distinct already: no lookup (which would make a big object quadratic).
      auto& entries = object.dict_data().entries;
      for (const auto& [key, item] : json.items()) entries.emplace_back(Value(key), from_json(item));
      return object;
    }
    default:
      return Value::undefined("unsupported JSON value");
  }
}

bool Value::is_tuple() const { return is_list_or_tuple() && list_data().is_tuple; }
bool Value::is_mapping() const { return is_dict_or_namespace() && !dict_data().is_namespace; }

const void* Value::identity() const {
  if (is_list_or_tuple()) return &list_data();
  if (is_dict_or_namespace()) return &dict_data();
  if (is_callable()) return &function();
  return nullptr;
}

bool Value::truthy() const {
  if (is_undefined() || is_none()) return false;
  if (is_bool()) return as_bool();
  if (is_int()) return as_int() != 0;
  if (is_float()) return as_double() != 0.0;
  if (is_string()) return !as_string().empty();
  if (is_list_or_tuple()) return !list_data().items.empty();
  if (is_mapping()) return !dict_data().entries.empty();
  return true;  // namespaces and callables
}

std::string Value::type_name() const {
  if (is_undefined()) return "Undefined";
  if (is_none()) return "NoneType";
  if (is_bool()) return "bool";
  if (is_int()) return "int";
  if (is_float()) return "float";
  if (is_string()) return "str";
  if (is_tuple()) return "tuple";
  if (is_list_or_tuple()) return "list";
  if (is_mapping()) return "dict";
  if (is_namespace()) return "Namespace";
  return "function";
}

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, laid out as Python's repr: positional for exponents -4..15.
  char buffer[64];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific).ptr;
  std::string text(buffer, end);
  const bool negative = text[0] == '-';
  if (negative) text.erase(0, 1);
  const size_t e = text.find('e');
  const int exponent = std::stoi(text.substr(e + 1));
  std::string digits = text.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the decimal point
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else {
      const size_t integer_digits = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= integer_digits) {
        out += digits + std::string(integer_digits - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, integer_digits) + "." + digits.substr(integer_digits);
      }
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exponent_text[16];
  std::snprintf(exponent_text, sizeof exponent_text, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exponent_text;
}

std::string python_string_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7F) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + quote;
}

std::string Value::str() const {
  if (is_undefined()) return "";
  if (is_string()) return as_string();
  return repr();
}

std::string Value::repr() const {
  std::string out;
  append_repr(out);
  return out;
}

void Value::append_repr(std::string& out) const {
  if (is_undefined()) return append_bounded(out, "Undefined");
  if (is_none()) return append_bounded(out, "None");
  if (is_bool()) return append_bounded(out, as_bool() ? "True" : "False");
  if (is_int()) return append_bounded(out, std::to_string(as_int()));
  if (is_float()) return append_bounded(out, python_float_repr(as_double()));
  if (is_string()) return append_bounded(out, python_string_repr(as_string()));
  if (is_callable()) return append_bounded(out, "<function " + function().name + ">");
  const NestingLevel level;
  if (is_list_or_tuple()) {
    const auto& data = list_data();
    append_bounded(out, data.is_tuple ? "(" : "[");
    for (size_t i = 0; i < data.items.size(); ++i) {
      if (i > 0) append_bounded(out, ", ");
      data.items[i].append_repr(out);
    }
    if (data.is_tuple && data.items.size() == 1) append_bounded(out, ",");
    return append_bounded(out, data.is_tuple ? ")" : "]");
  }
  append_bounded(out, is_namespace() ? "<Namespace {" : "{");
  bool first = true;
  for (const auto& [key, value] : dict_data().entries) {
    if (!first) append_bounded(out, ", ");
    key.append_repr(out);
    append_bounded(out, ": ");
    value.append_repr(out);
    first = false;
  }
  append_bounded(out, is_namespace() ? "}>" : "}");
}

namespace {

// Containers being freed on this thread hand what they hold to the release in progress, which frees it
// one value at a time: the stack stays flat however deep the data nests.
thread_local std::vector<Value>* release_queue = nullptr;

class Release {
 public:
  Release() : owner_(release_queue == nullptr) {
    if (owner_) release_queue = &queue_;
  }
  ~Release() {
    if (!owner_) return;
    while (!queue_.empty()) {
      Value last = std::move(queue_.back());
      queue_.pop_back();
    }  // `last` is freed here; what it holds joins the queue
    release_queue = nullptr;
  }
  Release(const Release&) = delete;
  Release& operator=(const Release&) = delete;

  void take(Value& value) {
    if (value.is_list_or_tuple() || value.is_dict_or_namespace() || value.is_callable()) {
      release_queue->push_back(std::move(value));
    }
  }

 private:
  bool owner_;
  std::vector<Value> queue_;
};

}  // namespace

ListData::~ListData() {
  Release release;
  for (auto& item : items) release.take(item);
}

DictData::~DictData() {
  Release release;
  for (auto& [key, value] : entries) {
    release.take(key);
    release.take(value);
  }
}

const Value* DictData::find(const Value& key) const {
  for (const auto& entry : entries) {
    if (entry.first == key) return &entry.second;
  }
  return nullptr;
}

void DictData::set(const Value& key, Value value) {
  for (auto& entry : entries) {
    if (entry.first == key) {
      entry.second = std::move(value);
      return;
    }
  }
  check_result_size(static_cast<int64_t>(entries.size()) + 1);
  charge_work(2 * sizeof(Value));
  entries.emplace_back(key, std::move(value));
}

Value CallArgs::get(size_t index, std::string_view name, Value fallback) const {
  if (index < positional.size()) return positional[index];
  for (const auto& [key, value] : keyword) {
    if (key == name) return value;
  }
  return fallback;
}

Value CallArgs::get(size_t index, std::string_view name) const {
  if (has(index, name)) return get(index, name, Value());
  return Value::undefined("missing required argument '" + std::string(name) + "'");
}

bool CallArgs::has(size_t index, std::string_view name) const {
  if (index < positional.size()) return true;
  for (const auto& entry : keyword) {
    if (entry.first == name) return true;
  }
  return false;
}

bool operator==(const Value& a, const Value& b) {
  charge_work(sizeof(Value));
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.is_undefined() || b.is_undefined()) return a.is_undefined() && b.is_undefined();
  if (a.is_none() || b.is_none()) return a.is_none() && b.is_none();
  if (a.is_string() && b.is_string()) {
    charge_work(static_cast<int64_t>(std::min(a.as_string().size(), b.as_string().size())));
    return a.as_string() == b.as_string();
  }
  if (a.is_list_or_tuple() && b.is_list_or_tuple()) {
    const NestingLevel level;
    return a.is_tuple() == b.is_tuple() && a.list_data().items == b.list_data().items;
  }
  if (a.is_mapping() && b.is_mapping()) {
    const NestingLevel level;
    const auto& left = a.dict_data().entries;
    const auto& right = b.dict_data();
    if (left.size() != right.entries.size()) return false;
    for (const auto& [key, value] : left) {
      const Value* other = right.find(key);
      if (!other || !(*other == value)) return false;
    }
    return true;
  }
  return a.identity() != nullptr && a.identity() == b.identity();
}

int compare(const Value& a, const Value& b) {
  charge_work(sizeof(Value));
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    charge_work(static_cast<int64_t>(std::min(a.as_string().size(), b.as_string().size())));
    // UTF-8 byte order is code point order.
    const int order = a.as_string().compare(b.as_string());
    return order < 0 ? -1 : (order > 0 ? 1 : 0);
  }
  if (a.is_list_or_tuple() && b.is_list_or_tuple() && a.is_tuple() == b.is_tuple()) {
    const NestingLevel level;
    const auto& x = a.list_data().items;
    const auto& y = b.list_data().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!(x[i] == y[i])) return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw RenderFailure("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

}  // namespace strata::jinja
