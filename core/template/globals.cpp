#include "core/template/globals.hpp"

#include <cstdio>

#include "core/template/limits.hpp"
#include "core/util/error.hpp"

namespace strata::jinja {
namespace {

int64_t integer_argument(const Value& value) {
  if (!value.is_number() || value.is_float())
    throw RenderFailure("'" + value.type_name() + "' object cannot be interpreted as an integer");
  return value.as_int();
}

Value range(const CallArgs& args) {
  if (args.positional.empty() || args.positional.size() > 3) throw RenderFailure("range expected 1 to 3 arguments");
  const bool only_stop = args.positional.size() == 1;
  const int64_t start = only_stop ? 0 : integer_argument(args.positional[0]);
  const int64_t stop = integer_argument(args.positional[only_stop ? 0 : 1]);
  const int64_t step = args.positional.size() == 3 ? integer_argument(args.positional[2]) : 1;
  if (step == 0) throw RenderFailure("range() arg 3 must not be zero");
  // The count first (in 128 bits: the span of two int64 may not fit one), so no item overflows.
  const __int128 span = step > 0 ? __int128{stop} - start : __int128{start} - stop;
  const __int128 stride = step > 0 ? __int128{step} : -__int128{step};
  const __int128 count = span > 0 ? (span + stride - 1) / stride : 0;
  check_result_size(count > kMaxResultSize ? kMaxResultSize + 1 : static_cast<int64_t>(count));
  charge_work(static_cast<int64_t>(count) * static_cast<int64_t>(sizeof(Value)));  // before allocating them
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(count));
  for (int64_t k = 0; k < static_cast<int64_t>(count); ++k)
    items.emplace_back(static_cast<int64_t>(start + __int128{k} * step));
  return Value::list(std::move(items));
}

// dict(mapping?, **items), and namespace(...), the one object templates may assign attributes on.
Value make_mapping(Value object, const CallArgs& args) {
  if (!args.positional.empty() && args.positional[0].is_mapping()) {
    const auto& entries = args.positional[0].dict_data().entries;
    charge_work(static_cast<int64_t>(entries.size() * 2 * sizeof(Value)));
    object.dict_data().entries = entries;
  }
  for (const auto& [name, value] : args.keyword) object.dict_data().set(Value(name), value);
  return object;
}

// joiner(sep): a function that returns "" the first time and sep afterwards.
Value make_joiner(const CallArgs& args) {
  const std::string separator = args.get(0, "sep", ", ").str();
  auto used = std::make_shared<bool>(false);
  return Value::function(
      "joiner", [separator, used](const CallArgs&) { return Value(std::exchange(*used, true) ? separator : ""); });
}

Value strftime_now(const std::optional<std::tm>& pinned, const CallArgs& args) {
  const std::string format = args.get(0, "format").str();
  std::tm time{};
  if (pinned) {
    time = *pinned;
  } else {
    const std::time_t now = std::time(nullptr);
    localtime_r(&now, &time);
  }
  if (format.find('\0') != std::string::npos) throw RenderFailure("strftime_now: a NUL character in the format");
  // No conversion writes more than 64 bytes (%c is the longest, ~24): an output this size cannot be cut short.
  std::string out(static_cast<size_t>(repeated_size(64, static_cast<int64_t>(format.size()) + 4)), '\0');
  const size_t written = std::strftime(out.data(), out.size(), format.c_str(), &time);
  out.resize(written);
  return out;
}

}  // namespace

std::vector<std::pair<std::string, Value>> make_globals(const std::optional<std::tm>& now) {
  return {
      {"range", Value::function("range", range)},
      {"namespace",
       Value::function("namespace", [](const CallArgs& a) { return make_mapping(Value::namespace_object(), a); })},
      {"dict", Value::function("dict", [](const CallArgs& a) { return make_mapping(Value::dict(), a); })},
      {"joiner", Value::function("joiner", make_joiner)},
      {"raise_exception",
       Value::function("raise_exception",
                       [](const CallArgs& args) -> Value { throw RenderFailure(args.get(0, "message").str()); })},
      {"strftime_now",
       Value::function("strftime_now", [now](const CallArgs& args) { return strftime_now(now, args); })},
  };
}

std::tm parse_time_pin(std::string_view text) {
  std::tm time{};
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  const std::string copy(text);
  const int fields = std::sscanf(copy.c_str(), "%d-%d-%d %d:%d:%d", &year, &month, &day, &hour, &minute, &second);
  if (fields < 5 || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    throw Error("time '" + copy + "': expected \"YYYY-MM-DD HH:MM\" or \"YYYY-MM-DD HH:MM:SS\"");
  }
  time.tm_year = year - 1900;
  time.tm_mon = month - 1;
  time.tm_mday = day;
  time.tm_hour = hour;
  time.tm_min = minute;
  time.tm_sec = second;
  time.tm_isdst = -1;
  std::tm normalized = time;
  std::mktime(&normalized);  // fills the weekday and day of the year
  time.tm_wday = normalized.tm_wday;
  time.tm_yday = normalized.tm_yday;
  time.tm_isdst = normalized.tm_isdst;
  return time;
}

}  // namespace strata::jinja
