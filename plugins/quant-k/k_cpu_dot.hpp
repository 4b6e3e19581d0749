// CPU dot kernels of Q4_K, Q5_K and Q6_K rows against Q8_K activations (a scalar variant, AVX2, and AVX-512), and
// Q4_K's and Q5_K's rows as int8 levels for the int8 kernels.
#pragma once

#include "strata/cpu_dot.hpp"

namespace strata::quant_k {

inline constexpr uint32_t kQ8KTypeId = 15;

extern const sdk::CpuDotVariants kQ4KDot;
extern const sdk::CpuDotVariants kQ5KDot;
extern const sdk::CpuDotVariants kQ6KDot;

// Q4_K and Q5_K rows for the CPU backend's int8 kernels (strata_quant_type::cpu_rows_to_int8), with their mins as
// offsets (cpu_rows_int8_offsets).
extern const sdk::CpuRowsToInt8Variants kQ4KToInt8;
extern const sdk::CpuRowsToInt8Variants kQ5KToInt8;
void q4_k_rows_int8_offsets(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, int16_t* group_offsets,
                            float* block_offset_scales);
void q5_k_rows_int8_offsets(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, int16_t* group_offsets,
                            float* block_offset_scales);

}  // namespace strata::quant_k
