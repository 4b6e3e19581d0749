#include "core/template/json_writer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/template/limits.hpp"
#include "core/template/unicode.hpp"

namespace strata::jinja {
namespace {

void append_unicode_escape(std::string& out, unsigned code) {
  char escaped[16];
  std::snprintf(escaped, sizeof escaped, "\\u%04x", code);
  append_bounded(out, escaped);
}

void append_json_string(std::string& out, const std::string& text, bool ensure_ascii) {
  append_bounded(out, "\"");
  for (size_t pos = 0; pos < text.size();) {
    const size_t start = pos;
    const char32_t cp = decode_utf8(text, pos);
    switch (cp) {
      case '"':
        append_bounded(out, "\\\"");
        break;
      case '\\':
        append_bounded(out, "\\\\");
        break;
      case '\n':
        append_bounded(out, "\\n");
        break;
      case '\r':
        append_bounded(out, "\\r");
        break;
      case '\t':
        append_bounded(out, "\\t");
        break;
      case '\b':
        append_bounded(out, "\\b");
        break;
      case '\f':
        append_bounded(out, "\\f");
        break;
      default:
        if (cp < 0x20) {
          append_unicode_escape(out, cp);
        } else if (ensure_ascii && cp >= 0x80) {
          if (cp >= 0x10000) {  // a surrogate pair, as Python writes it
            append_unicode_escape(out, 0xD800 + ((cp - 0x10000) >> 10));
            append_unicode_escape(out, 0xDC00 + ((cp - 0x10000) & 0x3FF));
          } else {
            append_unicode_escape(out, cp);
          }
        } else {
          append_bounded(out, std::string_view(text).substr(start, pos - start));
        }
    }
  }
  append_bounded(out, "\"");
}

std::string float_json(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return python_float_repr(value);
}

// json.dumps turns keys of other scalar types into strings.
std::string key_text(const Value& key) {
  if (key.is_string()) return key.as_string();
  if (key.is_none()) return "null";
  if (key.is_bool()) return key.as_bool() ? "true" : "false";
  if (key.is_int()) return std::to_string(key.as_int());
  if (key.is_float()) return float_json(key.as_double());
  throw RenderFailure("keys must be str, int, float, bool or None, not " + key.type_name());
}

class Writer {
 public:
  explicit Writer(const JsonStyle& style) : style_(style) {}

  void write(const Value& value, size_t depth) {
    if (value.is_none()) {
      append_bounded(out_, "null");
    } else if (value.is_bool()) {
      append_bounded(out_, value.as_bool() ? "true" : "false");
    } else if (value.is_int()) {
      append_bounded(out_, std::to_string(value.as_int()));
    } else if (value.is_float()) {
      append_bounded(out_, float_json(value.as_double()));
    } else if (value.is_string()) {
      append_json_string(out_, value.as_string(), style_.ensure_ascii);
    } else if (value.is_list_or_tuple()) {
      const NestingLevel level;
      write_list(value.list_data().items, depth);
    } else if (value.is_mapping()) {
      const NestingLevel level;
      write_dict(value.dict_data().entries, depth);
    } else {
      throw RenderFailure("Object of type " + value.type_name() + " is not JSON serializable");
    }
  }

  std::string take() { return std::move(out_); }

 private:
  void write_list(const std::vector<Value>& items, size_t depth) {
    if (items.empty()) {
      append_bounded(out_, "[]");
      return;
    }
    append_bounded(out_, "[");
    for (size_t i = 0; i < items.size(); ++i) {
      begin_item(i, depth + 1);
      write(items[i], depth + 1);
    }
    end_container(depth);
    append_bounded(out_, "]");
  }

  void write_dict(std::vector<std::pair<Value, Value>> entries, size_t depth) {
    if (entries.empty()) {
      append_bounded(out_, "{}");
      return;
    }
    if (style_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto& a, const auto& b) { return compare(a.first, b.first) < 0; });
    }
    append_bounded(out_, "{");
    for (size_t i = 0; i < entries.size(); ++i) {
      begin_item(i, depth + 1);
      append_json_string(out_, key_text(entries[i].first), style_.ensure_ascii);
      append_bounded(out_, style_.key_separator);
      write(entries[i].second, depth + 1);
    }
    end_container(depth);
    append_bounded(out_, "}");
  }

  void begin_item(size_t index, size_t depth) {
    if (index > 0) append_bounded(out_, style_.item_separator);
    end_container(depth);
  }

  // A newline and the indentation of depth, with an indent.
  void end_container(size_t depth) {
    if (!style_.indent) return;
    append_bounded(out_, "\n");
    for (size_t i = 0; i < depth; ++i) append_bounded(out_, *style_.indent);
  }

  const JsonStyle& style_;
  std::string out_;
};

}  // namespace

std::string to_python_json(const Value& value, const JsonStyle& style) {
  Writer writer(style);
  writer.write(value, 0);
  return writer.take();
}

}  // namespace strata::jinja
