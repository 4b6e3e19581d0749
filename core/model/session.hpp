// A loaded model and the forward pass of one sequence over it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/gguf/gguf_file.hpp"
#include "core/model/hybrid_experts.hpp"
#include "core/model/model_config.hpp"
#include "core/model/model_weights.hpp"

namespace strata {

// The configuration and weights of a model on one backend. The GGUF file must outlive it (the CPU backend
// reads weights from the file's mapping).
class Model {
 public:
  Model(const gguf::Model& file, Backend& backend);
  // A hybrid placement: the routed experts on expert_pool (a CPU backend) and in an expert cache on backend.
  Model(const gguf::Model& file, Backend& backend, Backend& expert_pool, ExpertCacheOptions cache);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  Backend& backend() const { return backend_; }
  // The hybrid placement, or nullptr when the backend holds every expert. Its cache changes as it runs (the
  // adaptive tier), hence not const with the model.
  HybridExperts* experts() const { return experts_.get(); }

 private:
  Backend& backend_;
  ModelConfig config_;
  std::unique_ptr<ExpertStore> expert_store_;  // a hybrid placement's experts in host memory
  ModelWeights weights_;
  std::unique_ptr<HybridExperts> experts_;
};

// How a session drives the backend: by default the fastest way the backend offers. Turning these off
// compares paths (A/B) or rules one out when hunting a fault; results stay within rounding.
struct ExecutionOptions {
  bool step_graphs = true;  // replay decode steps as recorded graphs where the backend can
  bool fused_ops = true;    // fused entries where the backend has them (attention_rope, add_rms_norm, route_experts)
  // the residual stream's norms computed inside the ops that read them (matmul_normed, route_experts_normed)
  // where the backend has them, instead of an add_rms_norm before them; needs fused_ops
  bool normed_inputs = true;
  bool concurrent_ops = true;  // independent ops (the q, k and v projections) at once where the backend can
};

struct SessionOptions {
  int32_t n_ctx = 4096;  // positions the KV cache holds
  int32_t kv_type = STRATA_KV_F16;
  int32_t max_batch = 256;  // tokens per forward step; longer inputs run in several steps
  ExecutionOptions execution;
  // Sees every layer's routing (strata profile). The ids are read back to the host each layer, so step graphs
  // are off while it is set.
  RoutingObserver on_routing = {};  // (an initializer: GCC 12 warns on designated initializers that leave it out)
};

// One sequence: its KV cache, its position, and the scratch buffers of a forward step.
class Session {
 public:
  Session(const Model& model, const SessionOptions& options);

  // Appends tokens at the current position. Returns logits, [n][n_vocab] row-major: for every token when
  // all_logits, else for the last one only. Throws strata::Error past the context, naming it, and when a
  // logit is NaN or infinite, naming the first layer and op whose output was (the tokens are then not kept).
  std::vector<float> forward(std::span<const int32_t> tokens, bool all_logits);
  // The same for the last token's logits only, in the session's memory (from the backend's host_alloc,
  // which a GPU's read reaches directly): valid until the next call. What generation and benchmarks call.
  std::span<const float> forward_last(std::span<const int32_t> tokens);

  int32_t position() const { return position_; }
  int32_t context_size() const { return options_.n_ctx; }
  int32_t max_batch() const { return options_.max_batch; }
  // Forgets everything at and after position (its cache entries are overwritten by later steps).
  void rewind(int32_t position);

 private:
  struct Scratch;
  // Throws strata::Error for no tokens, tokens past the context or outside the vocabulary.
  void check_input(std::span<const int32_t> tokens) const;
  // Runs checked tokens in steps of at most max_batch; logits (nullptr: none wanted) receives every token's rows
  // when all_logits, else the last token's.
  void run_steps(std::span<const int32_t> tokens, bool all_logits, float* logits);
  void step(std::span<const int32_t> tokens, bool all_logits, float* logits);
  // The non-finite check of a call's logits: throws strata::Error when one is NaN or infinite, after
  // locate_non_finite ran the call's tokens again from start. Costs one pass over the logits otherwise.
  void check_logits(std::span<const float> logits, int32_t start, std::span<const int32_t> tokens, bool all_logits);
  // Runs tokens again from position start, op by op with plain ops, reading every op's output; returns where
  // the first NaN or infinity appeared ("layer 3's matmul (blk.3.attn_q.weight): NaN at position 5, value 7"),
  // or "" when none did.
  std::string locate_non_finite(int32_t start, std::span<const int32_t> tokens, bool all_logits);
  // While locating only: stops the run at the first non-finite value among buffer's rows x width values, whose
  // first row is the step's token first_token. what names the op, tensor (of check_layer_ when it is a layer's)
  // its weight.
  void check_output(const Buffer& buffer, int32_t rows, int64_t width, const char* what, const char* tensor,
                    int32_t first_token = 0);
  void run_layers(int32_t n, const std::vector<int32_t>& positions);
  void run_as_graph(std::unique_ptr<StepGraph>& graph, int32_t n, const std::vector<int32_t>& positions,
                    const std::function<void()>& ops);
  void attention_block(const LayerWeights& layer, int32_t il, int32_t n, const std::vector<int32_t>& positions);
  void prepare_qk_by_ops(const LayerWeights& layer, int32_t n, const std::vector<int32_t>& positions);
  void moe_block(const LayerWeights& layer, int32_t n);
  // moe_block's two halves: the norm and the router, then the experts (where a hybrid placement reads the routing
  // back) and the shared expert.
  void moe_router(const LayerWeights& layer, int32_t n);
  void moe_experts(const LayerWeights& layer, int32_t n);
  // The layers of a step whose split layers read routing back: each layer's attention and router as a graph.
  void run_split_layers(int32_t n, const std::vector<int32_t>& positions);
  // The router of layer on normed's n rows into logits, ids and weights.
  void route(const LayerWeights& layer, const Buffer& normed, int32_t n, Buffer& logits, Buffer& ids, Buffer& weights);
  void residual_then_norm(const strata_weight* norm, const char* norm_name, int32_t n);
  bool uses_normed_inputs() const;
  strata_normed_input normed_input(const strata_weight* norm, bool writes_sum, Buffer* normed) const;
  void move_residual_to_sum();
  void add_pending_residual(int32_t n);
  void output_logits(int32_t n, bool all_logits, float* logits);

  const Model& model_;
  Backend& backend_;
  SessionOptions options_;
  KvCache cache_;
  std::shared_ptr<Scratch> scratch_;
  HostMemory last_logits_;                                      // forward_last's row, allocated on its first call
  std::shared_ptr<HybridExperts::StepBuffers> expert_buffers_;  // a hybrid placement's, for split layers
  // Two step graphs per decode step size (1..kMaxGraphTokens tokens; the first layers, the rest), made on
  // first use.
  std::map<int32_t, std::array<std::unique_ptr<StepGraph>, 2>> graphs_;
  // With a hybrid placement that splits layers, a graph per layer per decode step size instead: the layer's
  // attention block and router, up to the host's reading of the routing.
  std::map<int32_t, std::vector<std::unique_ptr<StepGraph>>> layer_graphs_;
  int32_t position_ = 0;
  // Within a step: a block's output waits in the scratch's projected buffer to be added to the residual
  // stream, which is in the scratch's x, or in its x_alt after an op with a normed input wrote the sum there
  // (the ops reading x at once must not see it change). Each layer starts and ends with it in x.
  bool residual_pending_ = false;
  Buffer* residual_ = nullptr;
  // Set by locate_non_finite: check_output reads what the ops wrote; check_layer_ is the layer they run in.
  bool checking_outputs_ = false;
  int32_t check_layer_ = -1;
};

}  // namespace strata
