// The Q4_0 and Q4_1 block formats (GGUF types 2 and 3): 32 values as 4-bit codes plus f16 scales.
#pragma once

#include <cstdint>

namespace quant_q4 {

// value = (code - 8) * d; block: f16 d, then 16 bytes of codes.
struct Q4_0Codec {
  static constexpr uint32_t type_id = 2, block_elements = 32, block_bytes = 2 + 16;
  static constexpr const char* name = "Q4_0";
  static void dequantize(const uint8_t* blocks, float* out, int64_t n_blocks);
  static void quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float* importance);
};

// value = code * d + m; block: f16 d, f16 m, then 16 bytes of codes.
struct Q4_1Codec {
  static constexpr uint32_t type_id = 3, block_elements = 32, block_bytes = 2 + 2 + 16;
  static constexpr const char* name = "Q4_1";
  static void dequantize(const uint8_t* blocks, float* out, int64_t n_blocks);
  static void quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float* importance);
};

}  // namespace quant_q4
