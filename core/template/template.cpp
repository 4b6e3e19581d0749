#include "core/template/template.hpp"

#include "core/template/evaluator.hpp"
#include "core/template/globals.hpp"
#include "core/template/lexer.hpp"
#include "core/template/parser.hpp"

namespace strata::jinja {

Template::Template(std::string_view source) : body_(std::make_shared<const Body>(parse(tokenize(source)))) {}

std::string Template::render(const std::vector<std::pair<std::string, Value>>& variables,
                             const RenderOptions& options) const {
  auto globals = std::make_shared<Frame>();
  for (auto& [name, value] : make_globals(options.now)) globals->set(name, std::move(value));
  auto frame = std::make_shared<Frame>(globals);
  for (const auto& [name, value] : variables) frame->set(name, value);
  std::string out;
  render_body(*body_, frame, out, options.max_evaluations, options.max_work);
  return out;
}

}  // namespace strata::jinja
