// Values of the template language with Python's semantics: None, bool, int, float, str, list, tuple,
// dict (insertion-ordered), namespace objects, callables, and Jinja2's Undefined. Lists and dicts are
// shared by reference, as in Python, and so are strings (they are immutable): copying a value never copies
// its data, so the work a render does is the data it builds (limits.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/template/limits.hpp"

namespace strata::jinja {

class Value;
struct ListData;
struct DictData;
struct Function;
struct CallArgs;

class Value {
 public:
  // Why the value is undefined (Jinja2's hint), used in the error when it is used where that fails.
  struct Undefined {
    std::string hint;
  };

  Value() : storage_(Undefined{}) {}
  Value(std::nullptr_t) : storage_(nullptr) {}
  Value(bool value) : storage_(value) {}
  Value(int value) : storage_(int64_t{value}) {}
  Value(int64_t value) : storage_(value) {}
  Value(size_t value) : storage_(static_cast<int64_t>(value)) {}
  Value(double value) : storage_(value) {}
  Value(std::string value);
  Value(std::string_view value) : Value(std::string(value)) {}
  Value(const char* value) : Value(std::string(value)) {}

  static Value undefined(std::string hint) { return Value(Storage(Undefined{std::move(hint)})); }
  static Value list(std::vector<Value> items = {});
  static Value tuple(std::vector<Value> items);
  static Value dict();
  static Value namespace_object();
  static Value function(std::string name, std::function<Value(const CallArgs&)> call);
  // Throws RenderFailure for data nested deeper than kMaxNesting or integers past 64 bits.
  static Value from_json(const nlohmann::ordered_json& json);

  bool is_undefined() const { return std::holds_alternative<Undefined>(storage_); }
  bool is_none() const { return std::holds_alternative<std::nullptr_t>(storage_); }
  bool is_bool() const { return std::holds_alternative<bool>(storage_); }
  bool is_int() const { return std::holds_alternative<int64_t>(storage_); }
  bool is_float() const { return std::holds_alternative<double>(storage_); }
  // Python's numbers: bool counts, as it is a subclass of int.
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return std::holds_alternative<SharedString>(storage_); }
  bool is_list_or_tuple() const { return std::holds_alternative<std::shared_ptr<ListData>>(storage_); }
  bool is_tuple() const;
  bool is_dict_or_namespace() const { return std::holds_alternative<std::shared_ptr<DictData>>(storage_); }
  bool is_mapping() const;  // a dict, not a namespace
  bool is_namespace() const { return is_dict_or_namespace() && !is_mapping(); }
  bool is_callable() const { return std::holds_alternative<std::shared_ptr<Function>>(storage_); }

  // The accessors throw RenderFailure ("expected an integer, got 'str'") for a value of another type, so
  // that a filter given the wrong kind of argument fails the render instead of the process.
  bool as_bool() const { return held<bool>("a bool"); }
  // Integer value of a bool or int.
  int64_t as_int() const { return is_bool() ? int64_t{as_bool()} : held<int64_t>("an integer"); }
  double as_double() const { return is_float() ? held<double>("a number") : static_cast<double>(as_int()); }
  const std::string& as_string() const { return *held<SharedString>("a string"); }
  ListData& list_data() const { return *held<std::shared_ptr<ListData>>("a list"); }
  DictData& dict_data() const { return *held<std::shared_ptr<DictData>>("a dict"); }
  const Function& function() const { return *held<std::shared_ptr<Function>>("a callable"); }
  const std::string& undefined_hint() const { return held<Undefined>("undefined").hint; }
  const void* identity() const;  // for `is sameas` on lists, dicts and callables

  bool truthy() const;
  // Python's str() and repr(); fail past kMaxResultSize bytes or kMaxNesting levels of data.
  std::string str() const;
  std::string repr() const;
  std::string type_name() const;  // Python's type name, for messages

 private:
  using SharedString = std::shared_ptr<const std::string>;  // never null
  using Storage = std::variant<Undefined, std::nullptr_t, bool, int64_t, double, SharedString,
                               std::shared_ptr<ListData>, std::shared_ptr<DictData>, std::shared_ptr<Function>>;
  void append_repr(std::string& out) const;
  explicit Value(Storage storage) : storage_(std::move(storage)) {}
  template <class T>
  const T& held(const char* expected) const {
    if (const T* value = std::get_if<T>(&storage_)) return *value;
    throw RenderFailure(std::string("expected ") + expected + ", got '" + type_name() + "'");
  }
  Storage storage_;
};

// Lists and dicts free what they hold without recursion: data built in a loop may nest far deeper than
// the stack would allow a recursive destructor to go.
struct ListData {
  std::vector<Value> items;
  bool is_tuple = false;

  ListData() = default;
  ListData(const ListData&) = delete;
  ListData& operator=(const ListData&) = delete;
  ~ListData();
};

struct DictData {
  std::vector<std::pair<Value, Value>> entries;
  bool is_namespace = false;

  DictData() = default;
  DictData(const DictData&) = delete;
  DictData& operator=(const DictData&) = delete;
  ~DictData();

  const Value* find(const Value& key) const;
  void set(const Value& key, Value value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // Python's argument binding: the argument at `index` or named `name`, else `fallback`, or an undefined
  // value whose use fails with "missing required argument 'name'".
  Value get(size_t index, std::string_view name, Value fallback) const;
  Value get(size_t index, std::string_view name) const;
  bool has(size_t index, std::string_view name) const;
};

struct Function {
  std::string name;
  std::function<Value(const CallArgs&)> call;
};

// Namespaces are the only values a template can change (`set ns.attr = ...`), so the only way to a reference
// cycle (`set ns.self = ns`), which reference counting would never free. For its lifetime this records the
// namespaces made on this thread, and at its end empties those still alive: a render's cycles end with it.
class NamespaceRecord {
 public:
  NamespaceRecord();
  ~NamespaceRecord();
  NamespaceRecord(const NamespaceRecord&) = delete;
  NamespaceRecord& operator=(const NamespaceRecord&) = delete;

 private:
  std::vector<std::weak_ptr<DictData>> namespaces_;
  std::vector<std::weak_ptr<DictData>>* saved_;
};

// Python's ==, where 1 == 1.0 == True and [1] != (1,). Charges the bytes compared to the render's work;
// fails past kMaxNesting levels of data.
bool operator==(const Value& a, const Value& b);
// Python's ordering (<0, 0, >0); throws RenderFailure for types Python cannot order. Charged as ==.
int compare(const Value& a, const Value& b);

std::string python_float_repr(double value);
std::string python_string_repr(std::string_view text);

}  // namespace strata::jinja
