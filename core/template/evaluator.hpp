// Renders a parsed template. Scopes follow Jinja2: each loop iteration, macro call, call/filter block
// and `with` gets its own frame, so `set` inside them does not leak out (namespace() objects are how
// templates carry state out of a loop); `if` shares its enclosing frame.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "core/template/ast.hpp"

namespace strata::jinja {

class Frame {
 public:
  explicit Frame(std::shared_ptr<Frame> parent = nullptr) : parent_(std::move(parent)) {}
  const Value* lookup(const std::string& name) const;
  void set(const std::string& name, Value value) { variables_[name] = std::move(value); }

 private:
  std::shared_ptr<Frame> parent_;
  std::unordered_map<std::string, Value> variables_;
};

using FramePtr = std::shared_ptr<Frame>;

// Appends the rendering of `body` to `out`, evaluating at most max_evaluations expressions and doing at
// most max_work bytes of work (limits.hpp). Errors are strata::Error naming the template line.
void render_body(const Body& body, const FramePtr& frame, std::string& out, int64_t max_evaluations, int64_t max_work);

}  // namespace strata::jinja
