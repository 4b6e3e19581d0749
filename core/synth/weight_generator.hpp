// Draws the float values of a synthetic model's tensors, scaled so that activations stay O(1) through the
// layers (the scales of the reference models, generalized to depth):
//   projections (q, k, v, gate, up)    N(0, 1/fan_in)                 unit-variance outputs from a normed input
//   residual writers (attn_output,     N(0, 1/(fan_in * 2 n_layer))   2 n_layer branches add O(1) in total
//     ffn_down)
//   token embedding                     N(0, 0.5^2)                    (+ the routing-skew lean along u)
//   output                              N(0, 4/n_embd)                 logits of std ~2: peaked, not degenerate
//   router                              N(0, 16/n_embd)                logits of std 4 (decisive routing)
//   norms 1 + N(0, 0.1^2) (within 0.7..1.3), biases N(0, 0.1^2)
// Each row is drawn from its own stream (seed, tensor name, row), so any slab of rows can be made on any
// thread and the file does not depend on the thread count.
#pragma once

#include <cstdint>

#include "core/synth/model_shape.hpp"
#include "core/synth/routing_skew.hpp"
#include "core/synth/tensor_plan.hpp"

namespace strata::synth {

class WeightGenerator {
 public:
  WeightGenerator(const ModelShape& shape, uint64_t seed, float routing_skew);

  // Writes rows [first_row, first_row + n_rows) of tensor, row_elements() values each, to out.
  void fill_rows(const PlannedTensor& tensor, uint64_t first_row, uint64_t n_rows, float* out) const;
  // The standard deviation of tensor's random part (about 1 for norms, whose mean is 1).
  float value_std(const PlannedTensor& tensor) const;

  uint64_t tensor_seed(const PlannedTensor& tensor) const;
  const RoutingSkew& routing_skew() const { return skew_; }

 private:
  void fill_row(const PlannedTensor& tensor, uint64_t row, float* out) const;

  ModelShape shape_;
  uint64_t seed_;
  RoutingSkew skew_;
};

}  // namespace strata::synth
