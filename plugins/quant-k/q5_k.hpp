// Q5_K (GGUF type 13): 256 values in 176 bytes. Q4_K's header (f16 d and dmin, 12 bytes of 6-bit
// scale/min codes), then 32 bytes holding each level's fifth bit, then 128 bytes of its low 4 bits.
#pragma once

#include <cstdint>

#include "k_cpu_dot.hpp"
#ifdef STRATA_WITH_CUDA
#include "cuda/k_cuda.hpp"
#endif

namespace strata::quant_k {

struct Q5KCodec {
  static constexpr uint32_t type_id = 13, block_elements = 256, block_bytes = 176;
  static constexpr const char* name = "Q5_K";
  static void dequantize(const uint8_t* blocks, float* out, int64_t n_blocks);
  static void quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float* importance);
  static constexpr uint32_t cpu_activation_type = kQ8KTypeId;
  static constexpr auto& cpu_dot_rows = sdk::dispatched_dot_rows<kQ5KDot>;
  static constexpr auto& cpu_dot_rows_multi = sdk::dispatched_dot_rows_multi<kQ5KDot>;
  static constexpr auto& cpu_rows_to_int8 = sdk::dispatched_rows_to_int8<kQ5KToInt8>;
  static constexpr auto& cpu_rows_int8_offsets = q5_k_rows_int8_offsets;
#ifdef STRATA_WITH_CUDA
  STRATA_CODEC_CUDA_LAUNCHERS(cuda, q5_k);
#endif
};

}  // namespace strata::quant_k
