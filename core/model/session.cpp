// The forward pass of the qwen3moe / qwen2moe family, written once over the backend op set:
//   x = embed(tokens)
//   per layer: x += Wo · attention(rope(norm_qk(Wq·n(x))), rope(norm_qk(Wk·n(x))), Wv·n(x))
//              x += moe(n(x)) [+ sigmoid(g·n(x)) * shared_expert(n(x))]
//   logits = Wout · n(x)
// (n = RMSNorm with the layer's weight; the bracketed parts depend on the Architecture.)
#include "core/model/session.hpp"

#include <cmath>
#include <utility>

#include "core/util/error.hpp"
#include "core/util/finite_values.hpp"
#include "core/util/log.hpp"

namespace strata {
namespace {

size_t floats(int64_t rows, int64_t width) { return static_cast<size_t>(rows * width) * sizeof(float); }

// Steps of at most this many tokens (decoding, short drafts) run as step graphs; prompt steps are few and
// long, and their launches are not what costs.
constexpr int32_t kMaxGraphTokens = 8;
// A step graph's launch takes host time that grows with its nodes (the GPU waits for all of it): the first
// layers go in a graph of their own, short to launch, and the rest's launch overlaps their run.
constexpr int32_t kLayersInFirstGraph = 2;

// Thrown by Session::check_output to end a locating run at the first non-finite output; never leaves Session.
struct NonFiniteOutput {
  std::string where;
};

}  // namespace

Model::Model(const gguf::Model& file, Backend& backend)
    : backend_(backend), config_(ModelConfig::from_gguf(file)), weights_(load_weights(backend, file, config_)) {}

Model::Model(const gguf::Model& file, Backend& backend, Backend& expert_pool, ExpertCacheOptions cache)
    : backend_(backend),
      config_(ModelConfig::from_gguf(file)),
      expert_store_(std::make_unique<ExpertStore>(backend, file, config_, cache.host_memory)),
      weights_(load_weights(backend, file, config_, &expert_pool, expert_store_.get())),
      experts_(std::make_unique<HybridExperts>(backend, expert_pool, file, *expert_store_, config_, weights_,
                                               std::move(cache))) {}

struct Session::Scratch {
  Scratch(Backend& backend, const ModelConfig& c, int32_t batch)
      : x(backend, floats(batch, c.n_embd)),
        x_alt(backend, floats(batch, c.n_embd)),
        normed(backend, floats(batch, c.n_embd)),
        q(backend, floats(batch, int64_t{c.n_head} * c.head_dim)),
        k(backend, floats(batch, int64_t{c.n_head_kv} * c.head_dim)),
        v(backend, floats(batch, int64_t{c.n_head_kv} * c.head_dim)),
        attention(backend, floats(batch, int64_t{c.n_head} * c.head_dim)),
        projected(backend, floats(batch, c.n_embd)),
        router_logits(backend, floats(batch, c.n_expert)),
        expert_ids(backend, floats(batch, c.n_expert_used)),  // int32, the same size as float
        expert_weights(backend, floats(batch, c.n_expert_used)),
        last_row(backend, floats(1, c.n_embd)),
        logits(backend, floats(batch, c.n_vocab)) {
    if (c.architecture->shared_expert) {
      shared_a = Buffer(backend, floats(batch, c.shared_ffn));
      shared_b = Buffer(backend, floats(batch, c.shared_ffn));
      shared_gate = Buffer(backend, floats(batch, 1));
    }
  }
  Buffer x, x_alt, normed, q, k, v, attention, projected, router_logits, expert_ids, expert_weights, last_row, logits;
  Buffer shared_a, shared_b, shared_gate;
};

Session::Session(const Model& model, const SessionOptions& options)
    : model_(model),
      backend_(model.backend()),
      options_(options),
      cache_(model.backend(), strata_kv_config{sizeof(strata_kv_config), model.config().n_layer, options.n_ctx,
                                               model.config().n_head_kv, model.config().head_dim, options.kv_type}) {
  if (options.max_batch < 1) throw Error("max_batch must be at least 1");
  scratch_ = std::make_shared<Scratch>(backend_, model.config(), options.max_batch);
  if (HybridExperts* experts = model.experts()) {
    // The first session places the cache, after its own memory: an automatic size takes what is left.
    expert_buffers_ = experts->make_buffers(options.max_batch);
    experts->place(options.max_batch);
  }
}

void Session::rewind(int32_t position) {
  if (position < 0 || position > position_) {
    throw Error("cannot rewind to position " + std::to_string(position) + " (the sequence is at " +
                std::to_string(position_) + ")");
  }
  position_ = position;
}

std::vector<float> Session::forward(std::span<const int32_t> tokens, bool all_logits) {
  check_input(tokens);
  const int32_t start = position_;
  std::vector<float> logits(static_cast<size_t>(all_logits ? tokens.size() : 1) * model_.config().n_vocab);
  run_steps(tokens, all_logits, logits.data());
  check_logits(logits, start, tokens, all_logits);
  return logits;
}

std::span<const float> Session::forward_last(std::span<const int32_t> tokens) {
  const auto n_vocab = static_cast<size_t>(model_.config().n_vocab);
  check_input(tokens);
  const int32_t start = position_;
  if (!last_logits_) last_logits_ = backend_.host_alloc(n_vocab * sizeof(float));
  auto* logits = static_cast<float*>(last_logits_.get());
  run_steps(tokens, false, logits);
  check_logits({logits, n_vocab}, start, tokens, false);
  return {logits, n_vocab};
}

void Session::check_logits(std::span<const float> logits, int32_t start, std::span<const int32_t> tokens,
                           bool all_logits) {
  if (all_finite(logits)) return;
  const size_t index = *first_non_finite(logits);
  const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
  const size_t token = all_logits ? index / n_vocab : tokens.size() - 1;
  std::string message = std::string("the logits are not finite (") + non_finite_name(logits[index]) + " for token id " +
                        std::to_string(index % n_vocab) + " at position " + std::to_string(start + token) + ")";
  const std::string origin = locate_non_finite(start, tokens, all_logits);
  position_ = start;  // the tokens are not part of the sequence
  message += origin.empty() ? "; run again op by op, every output was finite: the backend's fused ops or step graphs "
                              "went wrong (compare with --no-fused-ops, --no-graphs)"
                            : "; the first non-finite output is " + origin +
                                  " (`strata inspect --check MODEL` lists weights holding NaN or infinity)";
  throw Error(message);
}

std::string Session::locate_non_finite(int32_t start, std::span<const int32_t> tokens, bool all_logits) {
  // Plain ops one by one, so that every op's output is in a buffer that can be read after it.
  struct Restore {
    Session& session;
    ExecutionOptions execution;
    ~Restore() {
      session.options_.execution = execution;
      session.checking_outputs_ = false;
      session.check_layer_ = -1;
    }
  } restore{*this, options_.execution};
  options_.execution = {.step_graphs = false, .fused_ops = false, .normed_inputs = false, .concurrent_ops = false};
  checking_outputs_ = true;
  position_ = start;
  std::vector<float> logits(static_cast<size_t>(all_logits ? tokens.size() : 1) * model_.config().n_vocab);
  try {
    run_steps(tokens, all_logits, logits.data());
  } catch (const NonFiniteOutput& found) {
    return found.where;
  }
  return "";
}

void Session::check_output(const Buffer& buffer, int32_t rows, int64_t width, const char* what, const char* tensor,
                           int32_t first_token) {
  if (!checking_outputs_) return;
  std::vector<float> values(static_cast<size_t>(rows) * width);
  backend_.read(buffer, values.data(), values.size() * sizeof(float));
  const auto bad = first_non_finite(values);
  if (!bad) return;
  const std::string layer = check_layer_ >= 0 ? std::to_string(check_layer_) : "";
  std::string where = (layer.empty() ? "" : "layer " + layer + "'s ") + what;
  if (tensor != nullptr) where += std::string(" (") + (layer.empty() ? "" : "blk." + layer + ".") + tensor + ")";
  throw NonFiniteOutput{where + ": " + non_finite_name(values[*bad]) + " at position " +
                        std::to_string(position_ + first_token + static_cast<int64_t>(*bad / width)) + ", value " +
                        std::to_string(*bad % width)};
}

void Session::check_input(std::span<const int32_t> tokens) const {
  const ModelConfig& c = model_.config();
  if (tokens.empty()) throw Error("forward needs at least one token");
  if (position_ + static_cast<int64_t>(tokens.size()) > options_.n_ctx) {
    const bool at_model_limit = c.n_ctx_train > 0 && options_.n_ctx >= c.n_ctx_train;
    throw Error("the sequence would reach position " + std::to_string(position_ + tokens.size()) +
                ", past the context of " + std::to_string(options_.n_ctx) + " tokens" +
                (at_model_limit ? " (the model's context length)" : " (raise --ctx)"));
  }
  for (const int32_t token : tokens) {
    if (token < 0 || token >= c.n_vocab) {
      throw Error("token id " + std::to_string(token) + " is outside the vocabulary of " + std::to_string(c.n_vocab));
    }
  }
}

void Session::run_steps(std::span<const int32_t> tokens, bool all_logits, float* logits) {
  const ModelConfig& c = model_.config();
  for (size_t start = 0; start < tokens.size(); start += options_.max_batch) {
    const size_t count = std::min<size_t>(options_.max_batch, tokens.size() - start);
    const bool last_chunk = start + count == tokens.size();
    // Only the last chunk's logits are wanted for a prompt; earlier chunks only fill the cache.
    float* rows = all_logits ? logits + start * c.n_vocab : last_chunk ? logits : nullptr;
    step(tokens.subspan(start, count), all_logits, rows);
  }
}

void Session::step(std::span<const int32_t> tokens, bool all_logits, float* logits) {
  const ModelWeights& w = model_.weights();
  const auto& t = backend_.table();
  auto* b = backend_.get();
  Scratch& s = *scratch_;
  const auto n = static_cast<int32_t>(tokens.size());

  std::vector<int32_t> positions(n);
  for (int32_t i = 0; i < n; ++i) positions[i] = position_ + i;

  backend_.run("get_rows",
               [&](strata_error* e) { return t.get_rows(b, w.token_embd.get(), tokens.data(), n, s.x.get(), e); });
  check_output(s.x, n, model_.config().n_embd, "token embeddings", "token_embd.weight");
  HybridExperts* experts = model_.experts();
  try {
    run_layers(n, positions);
    if (logits != nullptr) output_logits(n, all_logits, logits);
  } catch (...) {
    if (experts != nullptr) experts->abandon_step();  // its pool may still read this session's buffers
    throw;
  }
  position_ += n;
  if (experts != nullptr) experts->end_step();
}

// The layers of one step, as two step graphs where the backend records them (layers [0, kLayersInFirstGraph)
// and the rest): a decode step's ops are the same every time, only the positions change.
void Session::run_layers(int32_t n, const std::vector<int32_t>& positions) {
  const int32_t n_layer = model_.config().n_layer;
  const auto layers = [&](int32_t first, int32_t end) {
    // Every layer starts from the stream in x and leaves its output to be added.
    residual_ = &scratch_->x;
    residual_pending_ = first > 0;
    for (int32_t il = first; il < end; ++il) {
      const LayerWeights& layer = model_.weights().layers[il];
      check_layer_ = il;
      attention_block(layer, il, n, positions);
      moe_block(layer, n);
    }
    check_layer_ = -1;
    if (end == n_layer) add_pending_residual(n);
  };
  const bool split_experts = model_.experts() != nullptr && model_.experts()->splits_layers();
  const bool recordable = options_.execution.step_graphs && !options_.on_routing && backend_.has_graphs();
  if (!recordable || n > kMaxGraphTokens) return layers(0, n_layer);
  if (split_experts) return run_split_layers(n, positions);
  auto& graphs = graphs_[n];
  const int32_t split = std::min(kLayersInFirstGraph, n_layer);
  run_as_graph(graphs[0], n, positions, [&] { layers(0, split); });
  if (split < n_layer) run_as_graph(graphs[1], n, positions, [&] { layers(split, n_layer); });
}

// A split layer's experts need the host (the routing read back), so a step cannot be one graph: each layer's
// attention block and router are, and the experts run op by op between them. Each graph leaves the residual
// stream where it found it, with nothing pending (the router's norm took the attention's output in), which a
// replay, running no core code, must be told.
void Session::run_split_layers(int32_t n, const std::vector<int32_t>& positions) {
  const int32_t n_layer = model_.config().n_layer;
  auto& graphs = layer_graphs_[n];
  graphs.resize(static_cast<size_t>(n_layer));
  residual_ = &scratch_->x;
  residual_pending_ = false;
  for (int32_t il = 0; il < n_layer; ++il) {
    const LayerWeights& layer = model_.weights().layers[il];
    check_layer_ = il;
    Buffer* stream = residual_;
    run_as_graph(graphs[static_cast<size_t>(il)], n, positions, [&] {
      attention_block(layer, il, n, positions);
      moe_router(layer, n);
    });
    residual_ = stream;
    residual_pending_ = false;
    moe_experts(layer, n);
  }
  check_layer_ = -1;
  add_pending_residual(n);
}

void Session::run_as_graph(std::unique_ptr<StepGraph>& graph, int32_t n, const std::vector<int32_t>& positions,
                           const std::function<void()>& ops) {
  if (!graph) graph = std::make_unique<StepGraph>(backend_);
  const StepGraph::Mode mode = graph->begin(positions);
  if (mode == StepGraph::Mode::record) {
    try {
      ops();
      graph->end();
    } catch (const Error& error) {
      // Nothing of the graph's ops ran: run them again without it, and it stays off.
      graph->discard();
      log().warn("{}: recording a step graph of {} tokens failed ({}); running without it", backend_.name(), n,
                 error.what());
      ops();
    }
    return;
  }
  if (mode == StepGraph::Mode::run) ops();
  graph->end();
}

void Session::attention_block(const LayerWeights& layer, int32_t il, int32_t n, const std::vector<int32_t>& positions) {
  const ModelConfig& c = model_.config();
  const auto& t = backend_.table();
  auto* b = backend_.get();
  Scratch& s = *scratch_;

  // Three reads of the normed residual stream into three buffers: independent. With normed inputs each op
  // normalizes the stream itself and q also writes the sum with the pending output (into the other residual
  // buffer, which k and v do not read).
  const bool normed_inputs = uses_normed_inputs();
  if (!normed_inputs) residual_then_norm(layer.attn_norm.get(), "attn_norm.weight", n);
  const auto project = [&](const char* what, const char* tensor, const strata_weight* w, const strata_weight* bias,
                           Buffer& out, int32_t heads, bool writes_sum) {
    if (!normed_inputs) {
      backend_.run(what, [&](strata_error* e) { return t.matmul(b, w, 0, s.normed.get(), n, bias, out.get(), e); });
      check_output(out, n, int64_t{heads} * c.head_dim, "matmul", tensor);
      return;
    }
    const strata_normed_input in = normed_input(layer.attn_norm.get(), writes_sum, nullptr);
    backend_.run(what, [&](strata_error* e) { return t.matmul_normed(b, w, &in, n, bias, out.get(), e); });
  };
  backend_.concurrently(options_.execution.concurrent_ops, [&] {
    project("matmul q", "attn_q.weight", layer.attn_q.get(), layer.attn_q_bias.get(), s.q, c.n_head, true);
    project("matmul k", "attn_k.weight", layer.attn_k.get(), layer.attn_k_bias.get(), s.k, c.n_head_kv, false);
    project("matmul v", "attn_v.weight", layer.attn_v.get(), layer.attn_v_bias.get(), s.v, c.n_head_kv, false);
  });
  if (normed_inputs) move_residual_to_sum();
  const strata_attention_params params{sizeof(strata_attention_params),
                                       il,
                                       n,
                                       c.n_head,
                                       c.n_head_kv,
                                       c.head_dim,
                                       1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                                       positions.data()};
  if (options_.execution.fused_ops && backend_.has_attention_rope()) {
    const bool qk_norm = c.architecture->qk_norm;
    const strata_qk_prepare prepare{sizeof(strata_qk_prepare),
                                    qk_norm ? layer.attn_q_norm.get() : nullptr,
                                    qk_norm ? layer.attn_k_norm.get() : nullptr,
                                    c.rms_eps,
                                    c.n_rot,
                                    c.rope_base};
    backend_.run("attention", [&](strata_error* e) {
      return t.attention_rope(b, cache_.get(), &params, &prepare, s.q.get(), s.k.get(), s.v.get(), s.attention.get(),
                              e);
    });
  } else {
    prepare_qk_by_ops(layer, n, positions);
    backend_.run("attention", [&](strata_error* e) {
      return t.attention(b, cache_.get(), &params, s.q.get(), s.k.get(), s.v.get(), s.attention.get(), e);
    });
  }
  check_output(s.attention, n, int64_t{c.n_head} * c.head_dim, "attention", nullptr);
  backend_.run("matmul attn_output", [&](strata_error* e) {
    return t.matmul(b, layer.attn_output.get(), 0, s.attention.get(), n, nullptr, s.projected.get(), e);
  });
  check_output(s.projected, n, c.n_embd, "matmul", "attn_output.weight");
  residual_pending_ = true;
}

// The residual stream between blocks: a block leaves its output in projected; the next block's norm adds it,
// in one op where the backend has add_rms_norm, or inside the ops that read the norm (normed inputs).
bool Session::uses_normed_inputs() const {
  return options_.execution.fused_ops && options_.execution.normed_inputs && backend_.has_normed_inputs();
}

// The residual stream (with the pending output) through norm, as an op's input: writes_sum for the one op of
// a block that also writes the sum into the other residual buffer (a copy of the stream where no output is
// pending, so that every block moves the stream and a layer ends where it began: a replayed step graph runs
// no core code that could follow it), normed for one that also keeps the norm.
strata_normed_input Session::normed_input(const strata_weight* norm, bool writes_sum, Buffer* normed) const {
  Scratch& s = *scratch_;
  Buffer& other = residual_ == &s.x ? s.x_alt : s.x;
  return {sizeof(strata_normed_input),
          residual_->get(),
          residual_pending_ ? s.projected.get() : nullptr,
          norm,
          model_.config().rms_eps,
          writes_sum ? other.get() : nullptr,
          normed != nullptr ? normed->get() : nullptr};
}

// After the ops of a normed input: the sum they wrote is the residual stream.
void Session::move_residual_to_sum() {
  Scratch& s = *scratch_;
  residual_ = residual_ == &s.x ? &s.x_alt : &s.x;
  residual_pending_ = false;
}

void Session::residual_then_norm(const strata_weight* norm, const char* norm_name, int32_t n) {
  const ModelConfig& c = model_.config();
  const auto& t = backend_.table();
  auto* b = backend_.get();
  Scratch& s = *scratch_;
  if (residual_pending_ && options_.execution.fused_ops && backend_.has_add_rms_norm()) {
    backend_.run("residual + rms_norm", [&](strata_error* e) {
      return t.add_rms_norm(b, residual_->get(), s.projected.get(), norm, n, c.n_embd, c.rms_eps, s.normed.get(), e);
    });
    residual_pending_ = false;
    return;
  }
  add_pending_residual(n);
  backend_.run("rms_norm", [&](strata_error* e) {
    return t.rms_norm(b, residual_->get(), norm, n, c.n_embd, c.rms_eps, s.normed.get(), e);
  });
  check_output(s.normed, n, c.n_embd, "rms_norm", norm_name);
}

void Session::add_pending_residual(int32_t n) {
  if (!residual_pending_) return;
  Scratch& s = *scratch_;
  backend_.run("residual", [&](strata_error* e) {
    return backend_.table().add(backend_.get(), residual_->get(), s.projected.get(),
                                int64_t{n} * model_.config().n_embd, residual_->get(), e);
  });
  check_output(*residual_, n, model_.config().n_embd, "residual add", nullptr);
  residual_pending_ = false;
}

// For a backend without attention_rope: the per-head norms and the rotation of q and k as separate ops.
void Session::prepare_qk_by_ops(const LayerWeights& layer, int32_t n, const std::vector<int32_t>& positions) {
  const ModelConfig& c = model_.config();
  const auto& t = backend_.table();
  auto* b = backend_.get();
  Scratch& s = *scratch_;
  if (c.architecture->qk_norm) {
    backend_.run("q norm", [&](strata_error* e) {
      return t.rms_norm(b, s.q.get(), layer.attn_q_norm.get(), n * c.n_head, c.head_dim, c.rms_eps, s.q.get(), e);
    });
    backend_.run("k norm", [&](strata_error* e) {
      return t.rms_norm(b, s.k.get(), layer.attn_k_norm.get(), n * c.n_head_kv, c.head_dim, c.rms_eps, s.k.get(), e);
    });
  }
  backend_.run("rope q", [&](strata_error* e) {
    return t.rope_neox(b, s.q.get(), positions.data(), n, c.n_head, c.head_dim, c.n_rot, c.rope_base, e);
  });
  backend_.run("rope k", [&](strata_error* e) {
    return t.rope_neox(b, s.k.get(), positions.data(), n, c.n_head_kv, c.head_dim, c.n_rot, c.rope_base, e);
  });
  const bool qk_norm = c.architecture->qk_norm;
  check_output(s.q, n, int64_t{c.n_head} * c.head_dim, qk_norm ? "q norm and rope" : "rope of q",
               qk_norm ? "attn_q_norm.weight" : nullptr);
  check_output(s.k, n, int64_t{c.n_head_kv} * c.head_dim, qk_norm ? "k norm and rope" : "rope of k",
               qk_norm ? "attn_k_norm.weight" : nullptr);
}

void Session::moe_block(const LayerWeights& layer, int32_t n) {
  moe_router(layer, n);
  moe_experts(layer, n);
}

void Session::moe_router(const LayerWeights& layer, int32_t n) {
  const ModelConfig& c = model_.config();
  const auto& t = backend_.table();
  auto* b = backend_.get();
  Scratch& s = *scratch_;
  if (uses_normed_inputs()) {
    // The router normalizes the stream itself, writes the sum, and keeps the norm for the experts.
    const strata_normed_input in = normed_input(layer.ffn_norm.get(), true, &s.normed);
    backend_.run("router + route", [&](strata_error* e) {
      return t.route_experts_normed(b, &in, layer.router.get(), n, c.n_expert, c.n_expert_used, c.architecture->routing,
                                    s.router_logits.get(), s.expert_ids.get(), s.expert_weights.get(), e);
    });
    move_residual_to_sum();
  } else {
    residual_then_norm(layer.ffn_norm.get(), "ffn_norm.weight", n);
    route(layer, s.normed, n, s.router_logits, s.expert_ids, s.expert_weights);
  }
}

void Session::moe_experts(const LayerWeights& layer, int32_t n) {
  const ModelConfig& c = model_.config();
  const auto& t = backend_.table();
  auto* b = backend_.get();
  Scratch& s = *scratch_;
  if (HybridExperts* experts = model_.experts()) {
    const ExpertRouter route_layer = [&](int32_t other, const Buffer& normed, Buffer& logits, Buffer& ids,
                                         Buffer& weights) {
      const int32_t current = std::exchange(check_layer_, other);  // a check names the router's own layer
      route(model_.weights().layers[other], normed, n, logits, ids, weights);
      check_layer_ = current;
    };
    experts->run(check_layer_, n, s.normed, s.expert_ids, s.expert_weights, s.projected, *expert_buffers_,
                 options_.on_routing, route_layer);
  } else {
    if (options_.on_routing) {
      std::vector<int32_t> ids(static_cast<size_t>(n) * c.n_expert_used);
      backend_.read(s.expert_ids, ids.data(), ids.size() * sizeof(int32_t));
      options_.on_routing(check_layer_, ids);
    }
    backend_.run("moe_ffn", [&](strata_error* e) {
      return t.moe_ffn(b, s.normed.get(), n, c.n_expert_used, s.expert_ids.get(), s.expert_weights.get(),
                       layer.gate_exps.get(), layer.up_exps.get(), layer.down_exps.get(), s.projected.get(), e);
    });
  }
  check_output(s.projected, n, c.n_embd, "experts", "ffn_{gate,up,down}_exps.weight");
  residual_pending_ = true;
  if (!c.architecture->shared_expert) return;
  add_pending_residual(n);  // the shared expert's output goes to projected too

  // Shared expert: x += sigmoid(g · h) * down(silu(gate · h) * (up · h)), h = the normed input.
  backend_.run("shared gate", [&](strata_error* e) {
    return t.matmul(b, layer.shared_gate.get(), 0, s.normed.get(), n, nullptr, s.shared_a.get(), e);
  });
  backend_.run("shared up", [&](strata_error* e) {
    return t.matmul(b, layer.shared_up.get(), 0, s.normed.get(), n, nullptr, s.shared_b.get(), e);
  });
  const int64_t shared_values = int64_t{n} * c.shared_ffn;
  backend_.run("silu", [&](strata_error* e) {
    return t.unary(b, STRATA_UNARY_SILU, s.shared_a.get(), shared_values, s.shared_a.get(), e);
  });
  backend_.run("mul", [&](strata_error* e) {
    return t.mul(b, s.shared_a.get(), s.shared_b.get(), shared_values, s.shared_a.get(), e);
  });
  backend_.run("shared down", [&](strata_error* e) {
    return t.matmul(b, layer.shared_down.get(), 0, s.shared_a.get(), n, nullptr, s.projected.get(), e);
  });
  backend_.run("shared expert gate", [&](strata_error* e) {
    return t.matmul(b, layer.shared_gate_inp.get(), 0, s.normed.get(), n, nullptr, s.shared_gate.get(), e);
  });
  backend_.run("sigmoid", [&](strata_error* e) {
    return t.unary(b, STRATA_UNARY_SIGMOID, s.shared_gate.get(), n, s.shared_gate.get(), e);
  });
  backend_.run("scale", [&](strata_error* e) {
    return t.scale_rows(b, s.projected.get(), s.shared_gate.get(), n, c.n_embd, e);
  });
  check_output(s.projected, n, c.n_embd, "shared expert", "ffn_{gate_inp,gate,up,down}_shexp.weight");
  residual_pending_ = true;
}

// The router of layer on normed's n rows: its product and the choice, as one op where the backend fuses them.
void Session::route(const LayerWeights& layer, const Buffer& normed, int32_t n, Buffer& logits, Buffer& ids,
                    Buffer& weights) {
  const ModelConfig& c = model_.config();
  const auto& t = backend_.table();
  auto* b = backend_.get();
  if (options_.execution.fused_ops && backend_.has_route_experts()) {
    backend_.run("router + route", [&](strata_error* e) {
      return t.route_experts(b, normed.get(), layer.router.get(), n, c.n_expert, c.n_expert_used,
                             c.architecture->routing, logits.get(), ids.get(), weights.get(), e);
    });
    return;
  }
  backend_.run("router", [&](strata_error* e) {
    return t.matmul(b, layer.router.get(), 0, normed.get(), n, nullptr, logits.get(), e);
  });
  check_output(logits, n, c.n_expert, "router", "ffn_gate_inp.weight");
  backend_.run("route", [&](strata_error* e) {
    return t.route(b, logits.get(), n, c.n_expert, c.n_expert_used, c.architecture->routing, ids.get(), weights.get(),
                   e);
  });
  check_output(weights, n, c.n_expert_used, "routing weights", nullptr);
}

void Session::output_logits(int32_t n, bool all_logits, float* logits) {
  const ModelConfig& c = model_.config();
  const ModelWeights& w = model_.weights();
  const auto& t = backend_.table();
  auto* b = backend_.get();
  Scratch& s = *scratch_;

  // For a prompt only the last position's logits matter: move that row alone through the output matmul.
  const Buffer* input = &s.x;
  int32_t rows = n;
  if (!all_logits && n > 1) {
    std::vector<float> row(c.n_embd);
    backend_.read(s.x, row.data(), floats(1, c.n_embd), floats(n - 1, c.n_embd));
    backend_.write(s.last_row, row.data(), floats(1, c.n_embd));
    input = &s.last_row;
    rows = 1;
  }
  backend_.run("output norm", [&](strata_error* e) {
    return t.rms_norm(b, input->get(), w.output_norm.get(), rows, c.n_embd, c.rms_eps, s.normed.get(), e);
  });
  check_output(s.normed, rows, c.n_embd, "rms_norm", "output_norm.weight", n - rows);
  backend_.run("output", [&](strata_error* e) {
    return t.matmul(b, w.output.get(), 0, s.normed.get(), rows, nullptr, s.logits.get(), e);
  });
  check_output(s.logits, rows, c.n_vocab, "output matmul", w.output_name.c_str(), n - rows);
  backend_.read(s.logits, logits, floats(rows, c.n_vocab));
}

}  // namespace strata
