// IQ3_XXS (GGUF type 18): 3.0625 bits per value.
//
// Block of 256 values, 98 bytes: f16 d; 64 bytes of grid indices (one per 4 values, into the 256-point grid);
// then per 32-value sub-block a little-endian uint32 holding four 7-bit sign indices (one per 8 values, into
// the even-parity sign table) in bits 0..27 and the scale nibble l in bits 28..31.
// A value decodes to d * (0.5 + l) * 0.5 * grid_byte * sign.
#pragma once

#include <cstdint>

#include "iq3_cpu_dot.hpp"
#ifdef STRATA_WITH_CUDA
#include "cuda/iq3_cuda.hpp"
#endif

namespace strata::iq3 {

struct Iq3XxsCodec {
  static constexpr uint32_t type_id = 18, block_elements = 256, block_bytes = 98;
  static constexpr const char* name = "IQ3_XXS";
  static void dequantize(const uint8_t* blocks, float* out, int64_t n_blocks);
  static void quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float* importance);
  static constexpr uint32_t cpu_activation_type = kQ8KTypeId;
  static constexpr auto& cpu_dot_rows = sdk::dispatched_dot_rows<kIq3XxsDot>;
  static constexpr auto& cpu_dot_rows_multi = sdk::dispatched_dot_rows_multi<kIq3XxsDot>;
  static constexpr auto& cpu_rows_to_int8 = sdk::dispatched_rows_to_int8<kIq3XxsToInt8>;
#ifdef STRATA_WITH_CUDA
  STRATA_CODEC_CUDA_LAUNCHERS(cuda, iq3_xxs);
#endif
};

}  // namespace strata::iq3
