// Q6_K (GGUF type 14): 256 values in 210 bytes: 128 bytes of low 4 bits, 64 bytes of high 2 bits, sixteen
// int8 scales (one per 16 values) and an f16 d at the end; value = d * scale * (level - 32).
#pragma once

#include <cstdint>

#include "k_cpu_dot.hpp"
#ifdef STRATA_WITH_CUDA
#include "cuda/k_cuda.hpp"
#endif

namespace strata::quant_k {

struct Q6KCodec {
  static constexpr uint32_t type_id = 14, block_elements = 256, block_bytes = 210;
  static constexpr const char* name = "Q6_K";
  static void dequantize(const uint8_t* blocks, float* out, int64_t n_blocks);
  static void quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float* importance);
  static constexpr uint32_t cpu_activation_type = kQ8KTypeId;
  static constexpr auto& cpu_dot_rows = sdk::dispatched_dot_rows<kQ6KDot>;
#ifdef STRATA_WITH_CUDA
  STRATA_CODEC_CUDA_LAUNCHERS(cuda, q6_k);
#endif
};

}  // namespace strata::quant_k
