#include "core/template/json_writer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/template/failure.hpp"
#include "core/template/unicode.hpp"

namespace strata::jinja {
namespace {

void append_unicode_escape(std::string& out, unsigned code) {
  char escaped[16];
  std::snprintf(escaped, sizeof escaped, "\\u%04x", code);
  out += escaped;
}

void append_json_string(std::string& out, const std::string& text, bool ensure_ascii) {
  out += '"';
  for (size_t pos = 0; pos < text.size();) {
    const size_t start = pos;
    const char32_t cp = decode_utf8(text, pos);
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
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
          out.append(text, start, pos - start);
        }
    }
  }
  out += '"';
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
      out_ += "null";
    } else if (value.is_bool()) {
      out_ += value.as_bool() ? "true" : "false";
    } else if (value.is_int()) {
      out_ += std::to_string(value.as_int());
    } else if (value.is_float()) {
      out_ += float_json(value.as_double());
    } else if (value.is_string()) {
      append_json_string(out_, value.as_string(), style_.ensure_ascii);
    } else if (value.is_list_or_tuple()) {
      write_list(value.list_data().items, depth);
    } else if (value.is_mapping()) {
      write_dict(value.dict_data().entries, depth);
    } else {
      throw RenderFailure("Object of type " + value.type_name() + " is not JSON serializable");
    }
  }

  std::string take() { return std::move(out_); }

 private:
  void write_list(const std::vector<Value>& items, size_t depth) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_ += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      begin_item(i, depth + 1);
      write(items[i], depth + 1);
    }
    end_container(depth);
    out_ += ']';
  }

  void write_dict(std::vector<std::pair<Value, Value>> entries, size_t depth) {
    if (entries.empty()) {
      out_ += "{}";
      return;
    }
    if (style_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return compare(a.first, b.first) < 0; });
    }
    out_ += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      begin_item(i, depth + 1);
      append_json_string(out_, key_text(entries[i].first), style_.ensure_ascii);
      out_ += style_.key_separator;
      write(entries[i].second, depth + 1);
    }
    end_container(depth);
    out_ += '}';
  }

  void begin_item(size_t index, size_t depth) {
    if (index > 0) out_ += style_.item_separator;
    if (style_.indent) out_ += '\n' + repeat_indent(depth);
  }

  void end_container(size_t depth) {
    if (style_.indent) out_ += '\n' + repeat_indent(depth);
  }

  std::string repeat_indent(size_t depth) const {
    std::string text;
    for (size_t i = 0; i < depth; ++i) text += *style_.indent;
    return text;
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
