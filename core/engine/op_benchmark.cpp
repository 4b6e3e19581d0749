#include "core/engine/op_benchmark.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <set>

#include "core/engine/benchmark.hpp"
#include "core/util/error.hpp"

namespace strata {
namespace {

constexpr const char* kOps[] = {"moe_ffn", "attn_q", "attn_k", "attn_v", "attn_output", "output"};
constexpr int32_t kRoutings = 16;

std::vector<float> random_values(size_t count, uint32_t seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> value(0.0f, 1.0f);
  std::vector<float> values(count);
  for (auto& v : values) v = value(random);
  return values;
}

// kRoutings routings of n_tokens tokens, each token's n_used experts distinct, from a fixed seed.
std::vector<std::vector<int32_t>> fixed_routings(const ModelConfig& c, int32_t n_tokens) {
  std::mt19937 random(7);
  std::vector<int32_t> experts(c.n_expert);
  std::iota(experts.begin(), experts.end(), 0);
  std::vector<std::vector<int32_t>> routings(kRoutings);
  for (auto& ids : routings) {
    for (int32_t t = 0; t < n_tokens; ++t) {
      std::shuffle(experts.begin(), experts.end(), random);
      ids.insert(ids.end(), experts.begin(), experts.begin() + c.n_expert_used);
    }
  }
  return routings;
}

const Weight& layer_matrix(const LayerWeights& layer, const std::string& op) {
  if (op == "attn_q") return layer.attn_q;
  if (op == "attn_k") return layer.attn_k;
  if (op == "attn_v") return layer.attn_v;
  return layer.attn_output;
}

// The tensor behind a matmul op's weight in layer il (the head: output.weight, or the tied embedding).
const gguf::TensorInfo& matrix_tensor(const gguf::Model& file, const std::string& op, int32_t il) {
  if (op != "output") return file.tensor("blk." + std::to_string(il) + "." + op + ".weight");
  const gguf::TensorInfo* output = file.find_tensor("output.weight");
  return output != nullptr ? *output : file.tensor("token_embd.weight");
}

}  // namespace

OpBenchmarkResult run_op_benchmark(const Model& model, const gguf::Model& file, const std::string& op,
                                   const OpBenchmarkOptions& options) {
  const int32_t n_tokens = options.n_tokens, calls = options.calls, repetitions = options.repetitions;
  if (std::find(std::begin(kOps), std::end(kOps), op) == std::end(kOps)) {
    std::string known;
    for (const char* name : kOps) known += (known.empty() ? "" : ", ") + std::string(name);
    throw Error("unknown op '" + op + "' to benchmark (choose " + known + ")");
  }
  if (n_tokens < 1 || calls < 1 || repetitions < 1) {
    throw Error("an op benchmark needs at least 1 token, 1 call and 1 repetition");
  }
  const ModelConfig& c = model.config();
  const int32_t per_token = options.experts_per_token == 0 ? c.n_expert_used : options.experts_per_token;
  if (per_token < 0 || per_token > c.n_expert_used) {
    throw Error("op benchmark: " + std::to_string(options.experts_per_token) +
                " experts per token is outside the model's 1 to " + std::to_string(c.n_expert_used));
  }
  const ModelWeights& weights = model.weights();
  Backend& backend = model.backend();
  const auto& t = backend.table();
  auto* b = backend.get();
  const bool moe = op == "moe_ffn";
  if (moe && !weights.layers[0].gate_exps) throw Error("op benchmark: the model has no routed experts (moe_ffn)");
  std::vector<int32_t> used = options.layers;  // the layers the calls take in turn
  if (used.empty()) {
    used.resize(static_cast<size_t>(c.n_layer));
    std::iota(used.begin(), used.end(), 0);
  }
  for (const int32_t il : used) {
    if (il < 0 || il >= c.n_layer) {
      throw Error("op benchmark: layer " + std::to_string(il) + " is outside the model's " + std::to_string(c.n_layer) +
                  " layers");
    }
  }
  const auto n_used_layers = static_cast<int32_t>(used.size());

  // Input widths and output rows: the experts' FFN maps the residual width to itself, a matmul as its tensor.
  const gguf::TensorInfo* matrix = moe ? nullptr : &matrix_tensor(file, op, used[0]);
  const int64_t width = moe ? c.n_embd : static_cast<int64_t>(matrix->shape[0]);
  const int64_t out_rows = moe ? c.n_embd : static_cast<int64_t>(matrix->shape[1]);
  const auto floats = [](int64_t rows, int64_t values) { return static_cast<size_t>(rows * values) * sizeof(float); };

  // The op's input as in a step: a norm's output (on a GPU also rounded to 8 bits, which the decode kernels
  // read), except the output projection's, which reads the attention's floats.
  Buffer raw(backend, floats(n_tokens, width)), input(backend, floats(n_tokens, width)),
      out(backend, floats(n_tokens, out_rows));
  const auto values = random_values(static_cast<size_t>(n_tokens * width), 42);
  backend.write(raw, values.data(), values.size() * sizeof(float));
  const Weight& norm = moe              ? weights.layers[used[0]].ffn_norm
                       : op == "output" ? weights.output_norm
                                        : weights.layers[used[0]].attn_norm;
  const Buffer& x = op == "attn_output" ? raw : input;
  if (op != "attn_output") {
    backend.run("op benchmark norm", [&](strata_error* e) {
      return t.rms_norm(b, raw.get(), norm.get(), n_tokens, static_cast<int32_t>(width), c.rms_eps, input.get(), e);
    });
  }

  OpBenchmarkResult result;
  result.op = op;
  result.n_tokens = n_tokens;
  std::vector<Buffer> ids, slot_weights;
  std::function<void(int32_t)> call;
  if (moe) {
    const auto routings = fixed_routings(c, n_tokens);
    result.experts_per_token = per_token;
    // Each token's first per_token experts weigh equally; the rest weigh 0, which moe_ffn skips.
    std::vector<float> shares(static_cast<size_t>(n_tokens * c.n_expert_used), 0.0f);
    for (size_t k = 0; k < shares.size(); ++k) {
      if (static_cast<int32_t>(k % c.n_expert_used) < per_token) shares[k] = 1.0f / static_cast<float>(per_token);
    }
    double experts_read = 0.0;
    for (const auto& routing : routings) {
      ids.emplace_back(backend, routing.size() * sizeof(int32_t));
      backend.write(ids.back(), routing.data(), routing.size() * sizeof(int32_t));
      slot_weights.emplace_back(backend, shares.size() * sizeof(float));
      backend.write(slot_weights.back(), shares.data(), shares.size() * sizeof(float));
      std::set<int32_t> computed;
      for (size_t k = 0; k < routing.size(); ++k) {
        if (shares[k] != 0.0f) computed.insert(routing[k]);
      }
      experts_read += static_cast<double>(computed.size()) / kRoutings;
    }
    double expert_bytes = 0.0;  // of one expert of a layer, a mean over the layers (mixes vary the types)
    for (const int32_t il : used) {
      for (const char* matrix : {"gate", "up", "down"}) {
        const auto& tensor = file.tensor("blk." + std::to_string(il) + ".ffn_" + matrix + "_exps.weight");
        expert_bytes += static_cast<double>(tensor.bytes) / c.n_expert / n_used_layers;
      }
    }
    result.weight_bytes_per_call = experts_read * expert_bytes;
    // gate and up (n_embd -> n_ff_exp) and down, per token and expert it chose
    result.flops_per_call = 2.0 * n_tokens * per_token * 3.0 * static_cast<double>(c.n_embd) * c.expert_ffn;
    call = [&](int32_t i) {
      const LayerWeights& layer = weights.layers[used[i % n_used_layers]];
      const int32_t routing = i % kRoutings;
      backend.run("op benchmark moe_ffn", [&](strata_error* e) {
        return t.moe_ffn(b, x.get(), n_tokens, c.n_expert_used, ids[routing].get(), slot_weights[routing].get(),
                         layer.gate_exps.get(), layer.up_exps.get(), layer.down_exps.get(), out.get(), e);
      });
    };
  } else {
    // The head has one weight; the layers' matmuls take the next layer's each call.
    const int32_t n_layers = op == "output" ? 1 : n_used_layers;
    for (int32_t k = 0; k < n_layers; ++k) {
      result.weight_bytes_per_call += static_cast<double>(matrix_tensor(file, op, used[k]).bytes) / n_layers;
    }
    result.flops_per_call = 2.0 * n_tokens * static_cast<double>(width) * static_cast<double>(out_rows);
    call = [&, n_layers](int32_t i) {  // n_layers by value: it ends with this block, the call outlives it
      const Weight& w = op == "output" ? weights.output : layer_matrix(weights.layers[used[i % n_layers]], op);
      backend.run("op benchmark matmul",
                  [&](strata_error* e) { return t.matmul(b, w.get(), 0, x.get(), n_tokens, nullptr, out.get(), e); });
    };
  }

  // A round's calls are queued back to back; reading the output back waits for all of them.
  const auto round_us_per_call = [&] {
    return seconds_of([&] {
             for (int32_t i = 0; i < calls; ++i) call(i);
             float sink = 0.0f;
             backend.read(out, &sink, sizeof sink);
           }) *
           1e6 / calls;
  };
  round_us_per_call();  // warm-up: scratch sizes, first launches, weights paged in
  for (int32_t r = 0; r < repetitions; ++r) result.samples.push_back(round_us_per_call());
  const SampleStats stats = sample_stats(result.samples);
  result.us_per_call = stats.mean;
  result.stddev_us = stats.stddev;
  return result;
}

}  // namespace strata
