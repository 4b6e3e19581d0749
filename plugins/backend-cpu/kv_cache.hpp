// One sequence's key/value cache. Rows of head_dim values are laid out [layer][kv head][position], so the
// positions one head attends over are contiguous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "float_kernels.hpp"
#include "strata/backend.h"

namespace strata::cpu {

// Values per int8 scale. One scale per whole row (64-128 values) lets a single large value coarsen the
// step of the whole head; groups of 16 keep the int8 cache within 4x of f16's logit error on the
// reference models at 2.25 bytes per 2 values.
inline constexpr int32_t kInt8GroupSize = 16;
// Positions per block of half keys: the float kernels' vector width.
inline constexpr int32_t kKeyBlock = kBlockLanes;

// The keys or the values of every (layer, kv head): spans of n_ctx rows of head_dim values, one row per position.
// Stored as IEEE halves or as int8 with one float scale per group of values. Half keys are stored in blocks of
// kKeyBlock positions, value by value (a block holds value d of its 16 positions side by side): a query's scores
// against a block are then head_dim vector FMAs, with no sum across lanes.
class KvTensor {
 public:
  enum class Role { keys, values };
  KvTensor(Role role, const strata_kv_config& config);
  // The memory such a tensor takes.
  static size_t bytes(Role role, const strata_kv_config& config);

  void store(const FloatKernels& kernels, size_t row, const float* x);
  // A kv head's whole span of rows first .. first + n_rows - 1 (first: its position 0) against the n vectors of
  // the query heads sharing it (vector v at offset v * stride): out[v * out_stride + j] = dot(row first + j, x_v)
  // (keys), and y_v += a[v * a_stride + j] * row first + j (values).
  void dot_rows(const FloatKernels& kernels, size_t first, int64_t n_rows, const float* xs, size_t x_stride, int n,
                float* out, size_t out_stride) const;
  void accumulate_rows(const FloatKernels& kernels, size_t first, int64_t n_rows, const float* a, size_t a_stride,
                       float* ys, size_t y_stride, int n) const;

 private:
  float dot_int8(const FloatKernels& kernels, size_t row, const float* x) const;
  void accumulate_int8(const FloatKernels& kernels, size_t row, float a, float* y) const;
  // Where row's first half is: blocked keys keep each span's rows in whole blocks.
  size_t half_offset(size_t row) const;

  bool is_int8_;
  bool blocked_;  // half keys, in blocks of kKeyBlock positions
  int32_t head_dim_;
  int32_t n_ctx_;
  int32_t groups_per_row_;  // the last group of a row may be short
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
