// The tensors of a synthetic model, with the names, GGUF shapes (ne0 first), types and order of a real
// llama.cpp file of the arch: the global tensors sorted by name, then each block's tensors sorted by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/synth/model_shape.hpp"
#include "core/synth/quant_mix.hpp"

namespace strata::synth {

// What a tensor's values are, which decides how they are drawn (see weight_generator.hpp).
enum class WeightKind {
  token_embedding,  // rows are tokens
  output,           // the lm head
  norm,             // RMSNorm weights, near 1
  bias,             // small
  projection,       // reads a normalized hidden state: unit variance out
  residual,         // writes into the residual stream: scaled down with depth
  router,           // ffn_gate_inp: rows are experts
};

struct PlannedTensor {
  std::string name;
  std::vector<uint64_t> shape;  // GGUF order, ne0 first
  uint32_t type = 0;            // GGUF type id
  WeightKind kind = WeightKind::projection;
  int32_t layer = -1;  // the block, or -1 for global tensors

  uint64_t row_elements() const { return shape[0]; }
  uint64_t rows() const;
};

std::vector<PlannedTensor> plan_tensors(const ModelShape& shape, QuantMix mix);

}  // namespace strata::synth
