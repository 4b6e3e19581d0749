// One sequence's key/value cache. Rows of head_dim values are laid out [layer][kv head][position], so the
// positions one head attends over are contiguous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "float_kernels.hpp"
#include "strata/backend.h"

namespace strata::cpu {

// The keys or the values: IEEE half rows, or int8 rows with one float scale per row.
class KvTensor {
 public:
  KvTensor(int32_t kv_type, size_t n_rows, int32_t head_dim);

  void store(size_t row, const float* x);
  float dot(const FloatKernels& kernels, size_t row, const float* x) const;
  // y += a * row
  void accumulate(const FloatKernels& kernels, size_t row, float a, float* y) const;

 private:
  bool is_int8_;
  int32_t head_dim_;
  std::vector<uint16_t> halves_;
  std::vector<int8_t> levels_;
  std::vector<float> scales_;
};

}  // namespace strata::cpu

struct strata_kv_cache {
  explicit strata_kv_cache(const strata_kv_config& config);

  size_t row(int32_t layer, int32_t kv_head, int32_t position) const {
    return (static_cast<size_t>(layer) * config.n_head_kv + kv_head) * config.n_ctx + position;
  }

  strata_kv_config config;
  strata::cpu::KvTensor keys;
  strata::cpu::KvTensor values;
};
