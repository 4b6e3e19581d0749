// Q4_K (GGUF type 12): 256 values in 144 bytes. f16 d and dmin, eight 6-bit scale/min codes packed in 12
// bytes, then 128 bytes of 4-bit levels; value = d * scale_code * level - dmin * min_code per 32 values.
#pragma once

#include <cstdint>

#include "k_cpu_dot.hpp"
#ifdef STRATA_WITH_CUDA
#include "cuda/k_cuda.hpp"
#endif

namespace strata::quant_k {

struct Q4KCodec {
  static constexpr uint32_t type_id = 12, block_elements = 256, block_bytes = 144;
  static constexpr const char* name = "Q4_K";
  static void dequantize(const uint8_t* blocks, float* out, int64_t n_blocks);
  static void quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float* importance);
  static constexpr uint32_t cpu_activation_type = kQ8KTypeId;
  static constexpr auto& cpu_dot_rows = sdk::dispatched_dot_rows<kQ4KDot>;
  static constexpr auto& cpu_dot_rows_multi = sdk::dispatched_dot_rows_multi<kQ4KDot>;
  static constexpr auto& cpu_rows_to_int8 = sdk::dispatched_rows_to_int8<kQ4KToInt8>;
  static constexpr auto& cpu_rows_int8_offsets = q4_k_rows_int8_offsets;
#ifdef STRATA_WITH_CUDA
  STRATA_CODEC_CUDA_LAUNCHERS(cuda, q4_k);
#endif
};

}  // namespace strata::quant_k
