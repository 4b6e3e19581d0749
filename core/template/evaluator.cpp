#include "core/template/evaluator.hpp"

#include "core/template/filters.hpp"
#include "core/template/limits.hpp"
#include "core/template/operations.hpp"
#include "core/template/predicates.hpp"
#include "core/util/error.hpp"

namespace strata::jinja {

const Value* Frame::lookup(const std::string& name) const {
  for (const Frame* frame = this; frame; frame = frame->parent_.get()) {
    const auto found = frame->variables_.find(name);
    if (found != frame->variables_.end()) return &found->second;
  }
  return nullptr;
}

namespace {

enum class Flow { Normal, Break, Continue };

[[noreturn]] void fail_at(int line, const std::string& message) {
  throw Error("template line " + std::to_string(line) + ": " + message);
}

// Runs work, turning a RenderFailure, or an exception of the standard library (a conversion out of range,
// a string too long), into a strata::Error at line; a strata::Error from further in passes through.
template <class Work>
auto at_line(int line, Work&& work) -> decltype(work()) {
  try {
    return work();
  } catch (const RenderFailure& failure) {
    fail_at(line, failure.what());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail_at(line, e.what());
  }
}

Flow render_nodes(const Body& body, const FramePtr& frame, std::string& out);

Value evaluate(const Expr& expr, const FramePtr& frame);

CallArgs evaluate_arguments(const Arguments& arguments, const FramePtr& frame) {
  CallArgs args;
  for (const auto& argument : arguments.positional) args.positional.push_back(evaluate(*argument, frame));
  for (const auto& [name, argument] : arguments.keyword) args.keyword.emplace_back(name, evaluate(*argument, frame));
  return args;
}

Value call(const Value& callee, const CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (!callee.is_callable()) throw RenderFailure("'" + callee.type_name() + "' object is not callable");
  return callee.function().call(args);
}

std::vector<Value> evaluate_all(const std::vector<ExprPtr>& operands, const FramePtr& frame) {
  std::vector<Value> values;
  for (const auto& operand : operands) values.push_back(evaluate(*operand, frame));
  return values;
}

// Runs a filter or test, naming it in a failure: "filter 'truncate': expected length >= 3, got -5".
template <class Work>
Value naming(const char* kind, const std::string& name, Work&& work) {
  try {
    return work();
  } catch (const RenderFailure& failure) {
    throw RenderFailure(std::string(kind) + " '" + name + "': " + failure.what());
  }
}

Value run_filter(const std::string& name, const Value& input, const CallArgs& args) {
  return naming("filter", name, [&] { return apply_filter(name, input, args); });
}

Value evaluate_optional(const ExprPtr& expr, const FramePtr& frame) {
  return expr ? evaluate(*expr, frame) : Value(nullptr);
}

Value evaluate_unchecked(const Expr& expr, const FramePtr& frame) {
  using Kind = Expr::Kind;
  switch (expr.kind) {
    case Kind::Literal:
      return expr.value;
    case Kind::Variable: {
      const Value* found = frame->lookup(expr.name);
      return found ? *found : Value::undefined("'" + expr.name + "' is undefined");
    }
    case Kind::List:
      return Value::list(evaluate_all(expr.operands, frame));
    case Kind::Tuple:
      return Value::tuple(evaluate_all(expr.operands, frame));
    case Kind::Dict: {
      Value object = Value::dict();
      for (size_t i = 0; i + 1 < expr.operands.size(); i += 2) {
        object.dict_data().set(evaluate(*expr.operands[i], frame), evaluate(*expr.operands[i + 1], frame));
      }
      return object;
    }
    case Kind::Attribute:
      return get_attribute(evaluate(*expr.operands[0], frame), expr.value);
    case Kind::Subscript: {
      const Value object = evaluate(*expr.operands[0], frame);
      const Expr& key = *expr.operands[1];
      if (key.kind == Kind::Slice) {
        return slice(object, evaluate_optional(key.operands[0], frame), evaluate_optional(key.operands[1], frame),
                     evaluate_optional(key.operands[2], frame));
      }
      return get_item(object, evaluate(key, frame));
    }
    case Kind::Slice:
      throw RenderFailure("a slice is only valid inside []");
    case Kind::Call: {
      const Value callee = evaluate(*expr.operands[0], frame);
      return call(callee, evaluate_arguments(expr.arguments, frame));
    }
    case Kind::Filter: {
      const Value input = evaluate(*expr.operands[0], frame);
      return run_filter(expr.name, input, evaluate_arguments(expr.arguments, frame));
    }
    case Kind::Test: {
      const Value input = evaluate(*expr.operands[0], frame);
      const CallArgs args = evaluate_arguments(expr.arguments, frame);
      return naming("test", expr.name, [&] { return Value(apply_test(expr.name, input, args)); });
    }
    case Kind::Unary: {
      const Value operand = evaluate(*expr.operands[0], frame);
      return expr.name == "not" ? Value(!operand.truthy()) : unary_operation(expr.name, operand);
    }
    case Kind::Binary: {
      // `and` / `or` short-circuit and return an operand, as in Python.
      const Value left = evaluate(*expr.operands[0], frame);
      if (expr.name == "and") return left.truthy() ? evaluate(*expr.operands[1], frame) : left;
      if (expr.name == "or") return left.truthy() ? left : evaluate(*expr.operands[1], frame);
      return binary_operation(expr.name, left, evaluate(*expr.operands[1], frame));
    }
    case Kind::Conditional: {
      if (evaluate(*expr.operands[1], frame).truthy()) return evaluate(*expr.operands[0], frame);
      if (expr.operands[2]) return evaluate(*expr.operands[2], frame);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined.");
    }
  }
  throw RenderFailure("unknown expression");
}

// The expressions the render in progress on this thread may still evaluate: a render has a budget of them,
// so a template of nested loops cannot keep a server busy for minutes.
thread_local int64_t evaluations_left = 0;
thread_local int64_t evaluation_budget = 0;

Value evaluate(const Expr& expr, const FramePtr& frame) {
  return at_line(expr.line, [&] {
    const NestingLevel level;
    if (--evaluations_left < 0) {
      throw RenderFailure("the template evaluated more than " + std::to_string(evaluation_budget) + " expressions");
    }
    return evaluate_unchecked(expr, frame);
  });
}

void assign(const AssignTarget& target, const Value& value, Frame& frame) {
  if (!target.unpack) {
    frame.set(target.names[0], value);
    return;
  }
  const auto items = iterate(value);
  if (items.size() != target.names.size()) {
    throw RenderFailure(items.size() > target.names.size()
                            ? "too many values to unpack (expected " + std::to_string(target.names.size()) + ")"
                            : "not enough values to unpack (expected " + std::to_string(target.names.size()) +
                                  ", got " + std::to_string(items.size()) + ")");
  }
  for (size_t i = 0; i < items.size(); ++i) frame.set(target.names[i], items[i]);
}

std::string render_to_string(const Body& body, const FramePtr& frame) {
  std::string out;
  render_nodes(body, frame, out);
  return out;
}

Value apply_filters(const std::vector<FilterCall>& filters, Value value, const FramePtr& frame) {
  for (const auto& filter : filters) {
    CallArgs args = evaluate_arguments(filter.arguments, frame);
    value = at_line(filter.line, [&] { return run_filter(filter.name, value, args); });
  }
  return value;
}

// Binds macro (or caller) parameters Python-style; extra arguments land in `varargs` and `kwargs`.
void bind_parameters(const std::vector<Parameter>& parameters, const CallArgs& args, const FramePtr& frame) {
  for (size_t i = 0; i < parameters.size(); ++i) {
    const Parameter& parameter = parameters[i];
    if (args.has(i, parameter.name)) {
      frame->set(parameter.name, args.get(i, parameter.name));
    } else if (parameter.default_value) {
      frame->set(parameter.name, evaluate(*parameter.default_value, frame));
    } else {
      frame->set(parameter.name, Value::undefined("parameter '" + parameter.name + "' was not provided"));
    }
  }
  std::vector<Value> extra_positional;
  for (size_t i = parameters.size(); i < args.positional.size(); ++i) extra_positional.push_back(args.positional[i]);
  Value extra_keyword = Value::dict();
  for (const auto& [name, value] : args.keyword) {
    const auto& keyword = name;  // clang 14 cannot capture a structured binding
    const bool is_parameter =
        std::any_of(parameters.begin(), parameters.end(), [&](const Parameter& p) { return p.name == keyword; });
    if (name == "caller") {
      frame->set("caller", value);
    } else if (!is_parameter) {
      extra_keyword.dict_data().set(Value(name), value);
    }
  }
  frame->set("varargs", Value::tuple(std::move(extra_positional)));
  frame->set("kwargs", extra_keyword);
}

// The macro keeps its defining frame weakly: that frame holds the macro, and a strong reference back would
// be a cycle that outlives every render.
Value make_macro(const Node& node, const FramePtr& defining_frame) {
  return Value::function(node.name, [&node, closure = std::weak_ptr<Frame>(defining_frame)](const CallArgs& args) {
    const FramePtr parent = closure.lock();
    if (!parent) throw RenderFailure("macro '" + node.name + "' was called after the scope defining it ended");
    auto frame = std::make_shared<Frame>(parent);
    bind_parameters(node.parameters, args, frame);
    return Value(render_to_string(node.body, frame));
  });
}

// Jinja2's `loop`: one object for the whole loop, updated in place at each iteration as Jinja2's LoopContext
// is (so an iteration costs no new data). Its fields, in the order make_loop adds them:
enum LoopField : size_t { kIndex0, kIndex, kRevindex0, kRevindex, kFirst, kLast, kPrevitem, kNextitem };

Value make_loop(size_t count, const std::shared_ptr<size_t>& position) {
  Value loop = Value::namespace_object();
  auto& data = loop.dict_data();
  for (const char* name : {"index0", "index", "revindex0", "revindex", "first", "last", "previtem", "nextitem"}) {
    data.set(Value(name), nullptr);
  }
  data.set(Value("length"), count);
  data.set(Value("depth"), 1);
  data.set(Value("depth0"), 0);
  data.set(Value("cycle"), Value::function("cycle", [position](const CallArgs& args) {
             if (args.positional.empty()) throw RenderFailure("no items for cycling given");
             return args.positional[*position % args.positional.size()];
           }));
  auto last_changed = std::make_shared<Value>();
  data.set(Value("changed"), Value::function("changed", [last_changed](const CallArgs& args) {
             const Value current = Value::list(args.positional);
             if (!last_changed->is_undefined() && *last_changed == current) return Value(false);
             *last_changed = current;
             return Value(true);
           }));
  return loop;
}

void update_loop(const Value& loop, const std::vector<Value>& items, size_t index) {
  auto& entries = loop.dict_data().entries;
  const size_t count = items.size();
  entries[kIndex0].second = index;
  entries[kIndex].second = index + 1;
  entries[kRevindex0].second = count - index - 1;
  entries[kRevindex].second = count - index;
  entries[kFirst].second = index == 0;
  entries[kLast].second = index + 1 == count;
  entries[kPrevitem].second = index > 0 ? items[index - 1] : Value::undefined("there is no previous item");
  entries[kNextitem].second = index + 1 < count ? items[index + 1] : Value::undefined("there is no next item");
}

Flow render_for(const Node& node, const FramePtr& frame, std::string& out) {
  std::vector<Value> items = iterate(evaluate(*node.expr, frame));
  if (node.condition) {
    std::vector<Value> kept;
    for (auto& item : items) {
      auto scope = std::make_shared<Frame>(frame);
      assign(node.target, item, *scope);
      if (evaluate(*node.condition, scope).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    render_nodes(node.else_body, std::make_shared<Frame>(frame), out);
    return Flow::Normal;
  }
  auto position = std::make_shared<size_t>(0);
  const Value loop = make_loop(items.size(), position);
  for (size_t i = 0; i < items.size(); ++i) {
    auto scope = std::make_shared<Frame>(frame);
    assign(node.target, items[i], *scope);
    *position = i;
    update_loop(loop, items, i);
    scope->set("loop", loop);
    if (render_nodes(node.body, scope, out) == Flow::Break) break;
  }
  return Flow::Normal;
}

void render_set(const Node& node, const Value& value, const FramePtr& frame) {
  const AssignTarget& target = node.target;
  if (target.namespace_attribute.empty()) {
    assign(target, value, *frame);
    return;
  }
  const Value* object = frame->lookup(target.names[0]);
  if (!object || !object->is_namespace()) throw RenderFailure("cannot assign attribute on non-namespace object");
  object->dict_data().set(Value(target.namespace_attribute), value);
}

// caller() keeps the frame of its call block weakly, as macros keep theirs: a caller stored in a namespace
// would otherwise keep frames (and what they hold) alive in chains and cycles.
Flow render_call_block(const Node& node, const FramePtr& frame, std::string& out) {
  const Value caller = Value::function("caller", [&node, closure = std::weak_ptr<Frame>(frame)](const CallArgs& args) {
    const FramePtr parent = closure.lock();
    if (!parent) throw RenderFailure("caller() was called after the call block that defines it ended");
    auto scope = std::make_shared<Frame>(parent);
    bind_parameters(node.parameters, args, scope);
    return Value(render_to_string(node.body, scope));
  });
  const Expr& call_expr = *node.expr;
  const Value callee = evaluate(*call_expr.operands[0], frame);
  CallArgs args = evaluate_arguments(call_expr.arguments, frame);
  args.keyword.emplace_back("caller", caller);
  out += call(callee, args).str();
  return Flow::Normal;
}

Flow render_node(const Node& node, const FramePtr& frame, std::string& out) {
  using Kind = Node::Kind;
  switch (node.kind) {
    case Kind::Text:
      out += node.text;
      return Flow::Normal;
    case Kind::Output:
      out += evaluate(*node.expr, frame).str();
      return Flow::Normal;
    case Kind::If:
      for (const auto& [condition, body] : node.branches) {
        if (evaluate(*condition, frame).truthy()) return render_nodes(body, frame, out);
      }
      return render_nodes(node.else_body, frame, out);
    case Kind::For:
      return render_for(node, frame, out);
    case Kind::Set:
      render_set(node, evaluate(*node.expr, frame), frame);
      return Flow::Normal;
    case Kind::SetBlock:
      render_set(node, apply_filters(node.filters, render_to_string(node.body, std::make_shared<Frame>(frame)), frame),
                 frame);
      return Flow::Normal;
    case Kind::Macro:
      frame->set(node.name, make_macro(node, frame));
      return Flow::Normal;
    case Kind::CallBlock:
      return render_call_block(node, frame, out);
    case Kind::FilterBlock:
      out += apply_filters(node.filters, render_to_string(node.body, std::make_shared<Frame>(frame)), frame).str();
      return Flow::Normal;
    case Kind::Scope: {
      auto scope = std::make_shared<Frame>(frame);
      for (const auto& [name, value] : node.assignments) scope->set(name, evaluate(*value, frame));
      return render_nodes(node.body, scope, out);
    }
    case Kind::Break:
      return Flow::Break;
    case Kind::Continue:
      return Flow::Continue;
  }
  return Flow::Normal;
}

Flow render_nodes(const Body& body, const FramePtr& frame, std::string& out) {
  for (const auto& node : body) {
    const Flow flow = at_line(node->line, [&] {
      const NestingLevel level;
      const Flow result = render_node(*node, frame, out);
      check_result_size(static_cast<int64_t>(out.size()));  // the rendering itself is a result too
      return result;
    });
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

}  // namespace

void render_body(const Body& body, const FramePtr& frame, std::string& out, int64_t max_evaluations, int64_t max_work) {
  evaluation_budget = evaluations_left = max_evaluations;
  const WorkBudget work(max_work);
  const NamespaceRecord namespaces;
  render_nodes(body, frame, out);
}

}  // namespace strata::jinja
