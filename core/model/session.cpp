// The forward pass of the qwen3moe / qwen2moe family, written once over the backend op set:
//   x = embed(tokens)
//   per layer: x += Wo · attention(rope(norm_qk(Wq·n(x))), rope(norm_qk(Wk·n(x))), Wv·n(x))
//              x += moe(n(x)) [+ sigmoid(g·n(x)) * shared_expert(n(x))]
//   logits = Wout · n(x)
// (n = RMSNorm with the layer's weight; the bracketed parts depend on the Architecture.)
#include "core/model/session.hpp"

#include <cmath>

#include "core/util/error.hpp"
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

}  // namespace

Model::Model(const gguf::Model& file, Backend& backend)
    : backend_(backend), config_(ModelConfig::from_gguf(file)), weights_(load_weights(backend, file, config_)) {}

struct Session::Scratch {
  Scratch(Backend& backend, const ModelConfig& c, int32_t batch)
      : x(backend, floats(batch, c.n_embd)),
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
  Buffer x, normed, q, k, v, attention, projected, router_logits, expert_ids, expert_weights, last_row, logits;
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
  std::vector<float> logits(static_cast<size_t>(all_logits ? tokens.size() : 1) * model_.config().n_vocab);
  run_steps(tokens, all_logits, logits.data());
  return logits;
}

std::span<const float> Session::forward_last(std::span<const int32_t> tokens) {
  const auto n_vocab = static_cast<size_t>(model_.config().n_vocab);
  check_input(tokens);
  if (!last_logits_) last_logits_ = backend_.host_alloc(n_vocab * sizeof(float));
  auto* logits = static_cast<float*>(last_logits_.get());
  run_steps(tokens, false, logits);
  return {logits, n_vocab};
}

void Session::check_input(std::span<const int32_t> tokens) const {
  const ModelConfig& c = model_.config();
  if (tokens.empty()) throw Error("forward needs at least one token");
  if (position_ + static_cast<int64_t>(tokens.size()) > options_.n_ctx) {
    throw Error("the sequence would reach position " + std::to_string(position_ + tokens.size()) +
                ", past the context of " + std::to_string(options_.n_ctx) + " tokens (raise --ctx)");
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

  backend_.run("get_rows", [&](strata_error* e) { return t.get_rows(b, w.token_embd.get(), tokens.data(), n, s.x.get(), e); });
  run_layers(n, positions);
  position_ += n;
  if (logits != nullptr) output_logits(n, all_logits, logits);
}

// The layers of one step, as two step graphs where the backend records them (layers [0, kLayersInFirstGraph)
// and the rest): a decode step's ops are the same every time, only the positions change.
void Session::run_layers(int32_t n, const std::vector<int32_t>& positions) {
  const int32_t n_layer = model_.config().n_layer;
  const auto layers = [&](int32_t first, int32_t end) {
    residual_pending_ = first > 0;  // every layer leaves its output to be added
    for (int32_t il = first; il < end; ++il) {
      const LayerWeights& layer = model_.weights().layers[il];
      attention_block(layer, il, n, positions);
      moe_block(layer, n);
    }
    if (end == n_layer) add_pending_residual(n);
  };
  if (!options_.execution.step_graphs || n > kMaxGraphTokens || !backend_.has_graphs()) return layers(0, n_layer);
  auto& graphs = graphs_[n];
  const int32_t split = std::min(kLayersInFirstGraph, n_layer);
  run_as_graph(graphs[0], n, positions, [&] { layers(0, split); });
  if (split < n_layer) run_as_graph(graphs[1], n, positions, [&] { layers(split, n_layer); });
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

  residual_then_norm(layer.attn_norm.get(), n);
  // Three reads of normed into three buffers: independent.
  backend_.concurrently(options_.execution.concurrent_ops, [&] {
    backend_.run("matmul q", [&](strata_error* e) {
      return t.matmul(b, layer.attn_q.get(), 0, s.normed.get(), n, layer.attn_q_bias.get(), s.q.get(), e);
    });
    backend_.run("matmul k", [&](strata_error* e) {
      return t.matmul(b, layer.attn_k.get(), 0, s.normed.get(), n, layer.attn_k_bias.get(), s.k.get(), e);
    });
    backend_.run("matmul v", [&](strata_error* e) {
      return t.matmul(b, layer.attn_v.get(), 0, s.normed.get(), n, layer.attn_v_bias.get(), s.v.get(), e);
    });
  });
  const strata_attention_params params{sizeof(strata_attention_params), il, n, c.n_head, c.n_head_kv, c.head_dim,
                                       1.0f / std::sqrt(static_cast<float>(c.head_dim)), positions.data()};
  if (options_.execution.fused_ops && backend_.has_attention_rope()) {
    const bool qk_norm = c.architecture->qk_norm;
    const strata_qk_prepare prepare{sizeof(strata_qk_prepare), qk_norm ? layer.attn_q_norm.get() : nullptr,
                                    qk_norm ? layer.attn_k_norm.get() : nullptr, c.rms_eps, c.n_rot, c.rope_base};
    backend_.run("attention", [&](strata_error* e) {
      return t.attention_rope(b, cache_.get(), &params, &prepare, s.q.get(), s.k.get(), s.v.get(), s.attention.get(), e);
    });
  } else {
    prepare_qk_by_ops(layer, n, positions);
    backend_.run("attention", [&](strata_error* e) {
      return t.attention(b, cache_.get(), &params, s.q.get(), s.k.get(), s.v.get(), s.attention.get(), e);
    });
  }
  backend_.run("matmul attn_output", [&](strata_error* e) {
    return t.matmul(b, layer.attn_output.get(), 0, s.attention.get(), n, nullptr, s.projected.get(), e);
  });
  residual_pending_ = true;
}

// The residual stream between blocks: a block leaves its output in projected for x; the next block's norm
// adds it, in one op where the backend has add_rms_norm.
void Session::residual_then_norm(const strata_weight* norm, int32_t n) {
  const ModelConfig& c = model_.config();
  const auto& t = backend_.table();
  auto* b = backend_.get();
  Scratch& s = *scratch_;
  if (residual_pending_ && options_.execution.fused_ops && backend_.has_add_rms_norm()) {
    backend_.run("residual + rms_norm", [&](strata_error* e) {
      return t.add_rms_norm(b, s.x.get(), s.projected.get(), norm, n, c.n_embd, c.rms_eps, s.normed.get(), e);
    });
    residual_pending_ = false;
    return;
  }
  add_pending_residual(n);
  backend_.run("rms_norm", [&](strata_error* e) { return t.rms_norm(b, s.x.get(), norm, n, c.n_embd, c.rms_eps, s.normed.get(), e); });
}

void Session::add_pending_residual(int32_t n) {
  if (!residual_pending_) return;
  Scratch& s = *scratch_;
  backend_.run("residual", [&](strata_error* e) {
    return backend_.table().add(backend_.get(), s.x.get(), s.projected.get(), int64_t{n} * model_.config().n_embd,
                                s.x.get(), e);
  });
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
}

void Session::moe_block(const LayerWeights& layer, int32_t n) {
  const ModelConfig& c = model_.config();
  const auto& t = backend_.table();
  auto* b = backend_.get();
  Scratch& s = *scratch_;

  residual_then_norm(layer.ffn_norm.get(), n);
  if (options_.execution.fused_ops && backend_.has_route_experts()) {
    backend_.run("router + route", [&](strata_error* e) {
      return t.route_experts(b, s.normed.get(), layer.router.get(), n, c.n_expert, c.n_expert_used,
                             c.architecture->routing, s.router_logits.get(), s.expert_ids.get(),
                             s.expert_weights.get(), e);
    });
  } else {
    backend_.run("router", [&](strata_error* e) {
      return t.matmul(b, layer.router.get(), 0, s.normed.get(), n, nullptr, s.router_logits.get(), e);
    });
    backend_.run("route", [&](strata_error* e) {
      return t.route(b, s.router_logits.get(), n, c.n_expert, c.n_expert_used, c.architecture->routing,
                     s.expert_ids.get(), s.expert_weights.get(), e);
    });
  }
  backend_.run("moe_ffn", [&](strata_error* e) {
    return t.moe_ffn(b, s.normed.get(), n, c.n_expert_used, s.expert_ids.get(), s.expert_weights.get(),
                     layer.gate_exps.get(), layer.up_exps.get(), layer.down_exps.get(), s.projected.get(), e);
  });
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
  backend_.run("scale", [&](strata_error* e) { return t.scale_rows(b, s.projected.get(), s.shared_gate.get(), n, c.n_embd, e); });
  residual_pending_ = true;
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
  backend_.run("output", [&](strata_error* e) {
    return t.matmul(b, w.output.get(), 0, s.normed.get(), rows, nullptr, s.logits.get(), e);
  });
  backend_.read(s.logits, logits, floats(rows, c.n_vocab));
}

}  // namespace strata
