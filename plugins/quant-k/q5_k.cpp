#include "q5_k.hpp"

#include "k_common.hpp"

namespace strata::quant_k {
namespace {
constexpr int kHighBitsOffset = kScaleMinHeaderBytes;
constexpr int kLowBitsOffset = kHighBitsOffset + 32;
constexpr int kMaxLevel = 31;
}  // namespace

void Q5KCodec::dequantize(const uint8_t* blocks, float* out, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = blocks + b * block_bytes;
    decode_scale_min_block(block, block + kLowBitsOffset, block + kHighBitsOffset, out + b * kSuperBlock);
  }
}

void Q5KCodec::quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float* importance) {
  ScaleMinBlock quantized;
  for (int64_t b = 0; b < n_per_row / kSuperBlock; ++b) {
    const int64_t start = b * kSuperBlock;
    quantize_scale_min_block(src + start, importance != nullptr ? importance + start : nullptr, kMaxLevel, quantized);
    uint8_t* block = blocks + b * block_bytes;
    encode_scale_min_block(quantized, block, block + kLowBitsOffset, block + kHighBitsOffset);
  }
}

}  // namespace strata::quant_k
