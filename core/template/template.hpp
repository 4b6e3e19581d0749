// A Jinja template compiled once and rendered many times, configured as Hugging Face's
// apply_chat_template configures Jinja2 (trim_blocks, lstrip_blocks, no trailing newline, the
// loopcontrols extension, raise_exception, strftime_now, Hugging Face's tojson).
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/template/value.hpp"

namespace strata::jinja {

struct Node;

struct RenderOptions {
  std::optional<std::tm> now;  // pins strftime_now (local time); unset: the clock
  // Expressions one render may evaluate before it fails: a bound on the work a template can cause.
  int64_t max_evaluations = 10'000'000;
};

class Template {
 public:
  // Throws strata::Error "template line N: ..." on syntax errors, unknown filters, tests and tags.
  explicit Template(std::string_view source);

  // Throws strata::Error "template line N: ..." when rendering fails (raise_exception included).
  std::string render(const std::vector<std::pair<std::string, Value>>& variables, const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Node>>> body_;
};

}  // namespace strata::jinja
