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

#include "core/template/limits.hpp"
#include "core/template/value.hpp"

namespace strata::jinja {

struct Node;

struct RenderOptions {
  std::optional<std::tm> now;  // pins strftime_now (local time); unset: the clock
  // Expressions one render may evaluate, and the bytes of data it may build, copy or compare, before it
  // fails: bounds on the time and memory a template can take (limits.hpp, docs/templates.md).
  int64_t max_evaluations = kDefaultMaxEvaluations;
  int64_t max_work = kDefaultMaxWork;
};

class Template {
 public:
  // Throws strata::Error "template line N: ..." on syntax errors, unknown filters, tests and tags.
  explicit Template(std::string_view source);

  // Throws strata::Error "template line N: ..." when rendering fails (raise_exception included).
  std::string render(const std::vector<std::pair<std::string, Value>>& variables,
                     const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Node>>> body_;
};

}  // namespace strata::jinja
