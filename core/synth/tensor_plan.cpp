#include "core/synth/tensor_plan.hpp"

#include <algorithm>
#include <functional>

#include "core/gguf/ggml_types.hpp"

namespace strata::synth {

uint64_t PlannedTensor::rows() const {
  uint64_t rows = 1;
  for (size_t i = 1; i < shape.size(); ++i) rows *= shape[i];
  return rows;
}

namespace {

class PlanBuilder {
 public:
  PlanBuilder(const ModelShape& shape, QuantMix mix) : shape_(shape), mix_(mix) {}

  void matrix(const std::string& name, std::vector<uint64_t> dims, MatrixSlot slot, WeightKind kind) {
    const uint32_t type = matrix_type(shape_, mix_, slot, dims[0]);
    group_.push_back({name, std::move(dims), type, kind, layer_});
  }
  void f32(const std::string& name, std::vector<uint64_t> dims, WeightKind kind) {
    group_.push_back({name, std::move(dims), gguf::type_id::F32, kind, layer_});
  }
  // Ends a group (the global tensors, or one block) and starts the next; each group is sorted by name.
  void close_group(int32_t next_layer) {
    std::sort(group_.begin(), group_.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    std::move(group_.begin(), group_.end(), std::back_inserter(plan_));
    group_.clear();
    layer_ = next_layer;
  }
  std::vector<PlannedTensor> take() { return std::move(plan_); }

 private:
  const ModelShape& shape_;
  QuantMix mix_;
  int32_t layer_ = -1;
  std::vector<PlannedTensor> group_;
  std::vector<PlannedTensor> plan_;
};

void plan_block(PlanBuilder& plan, const ModelShape& s, uint32_t layer) {
  const std::string blk = "blk." + std::to_string(layer) + ".";
  const bool qwen2 = s.arch == Arch::qwen2moe;
  using K = WeightKind;
  using M = MatrixSlot;
  plan.f32(blk + "attn_norm.weight", {s.n_embd}, K::norm);
  plan.matrix(blk + "attn_q.weight", {s.n_embd, s.q_dim()}, M::attn_q, K::projection);
  plan.matrix(blk + "attn_k.weight", {s.n_embd, s.kv_dim()}, M::attn_k, K::projection);
  plan.matrix(blk + "attn_v.weight", {s.n_embd, s.kv_dim()}, M::attn_v, K::projection);
  if (qwen2) {
    plan.f32(blk + "attn_q.bias", {s.q_dim()}, K::bias);
    plan.f32(blk + "attn_k.bias", {s.kv_dim()}, K::bias);
    plan.f32(blk + "attn_v.bias", {s.kv_dim()}, K::bias);
  } else {
    plan.f32(blk + "attn_q_norm.weight", {s.head_dim}, K::norm);
    plan.f32(blk + "attn_k_norm.weight", {s.head_dim}, K::norm);
  }
  plan.matrix(blk + "attn_output.weight", {s.q_dim(), s.n_embd}, M::attn_output, K::residual);
  plan.f32(blk + "ffn_norm.weight", {s.n_embd}, K::norm);
  plan.f32(blk + "ffn_gate_inp.weight", {s.n_embd, s.n_expert}, K::router);
  plan.matrix(blk + "ffn_gate_exps.weight", {s.n_embd, s.n_ff_exp, s.n_expert}, M::ffn_expert, K::projection);
  plan.matrix(blk + "ffn_up_exps.weight", {s.n_embd, s.n_ff_exp, s.n_expert}, M::ffn_expert, K::projection);
  plan.matrix(blk + "ffn_down_exps.weight", {s.n_ff_exp, s.n_embd, s.n_expert}, M::ffn_expert, K::residual);
  if (qwen2) {
    plan.f32(blk + "ffn_gate_inp_shexp.weight", {s.n_embd}, K::projection);
    plan.matrix(blk + "ffn_gate_shexp.weight", {s.n_embd, s.n_ff_shexp}, M::ffn_shared, K::projection);
    plan.matrix(blk + "ffn_up_shexp.weight", {s.n_embd, s.n_ff_shexp}, M::ffn_shared, K::projection);
    plan.matrix(blk + "ffn_down_shexp.weight", {s.n_ff_shexp, s.n_embd}, M::ffn_shared, K::residual);
  }
}

}  // namespace

std::vector<PlannedTensor> plan_tensors(const ModelShape& s, QuantMix mix) {
  PlanBuilder plan(s, mix);
  plan.matrix("token_embd.weight", {s.n_embd, s.n_vocab}, MatrixSlot::token_embd, WeightKind::token_embedding);
  plan.f32("output_norm.weight", {s.n_embd}, WeightKind::norm);
  plan.matrix("output.weight", {s.n_embd, s.n_vocab}, MatrixSlot::output, WeightKind::output);
  plan.close_group(0);
  for (uint32_t layer = 0; layer < s.n_layer; ++layer) {
    plan_block(plan, s, layer);
    plan.close_group(static_cast<int32_t>(layer + 1));
  }
  return plan.take();
}

}  // namespace strata::synth
