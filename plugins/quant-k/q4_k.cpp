#include "q4_k.hpp"

#include "k_common.hpp"

namespace strata::quant_k {
namespace {
constexpr int kLevelsOffset = kScaleMinHeaderBytes;
constexpr int kMaxLevel = 15;
}  // namespace

void Q4KCodec::dequantize(const uint8_t* blocks, float* out, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = blocks + b * block_bytes;
    decode_scale_min_block(block, block + kLevelsOffset, nullptr, out + b * kSuperBlock);
  }
}

void Q4KCodec::quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float* importance) {
  ScaleMinBlock quantized;
  for (int64_t b = 0; b < n_per_row / kSuperBlock; ++b) {
    const int64_t start = b * kSuperBlock;
    quantize_scale_min_block(src + start, importance != nullptr ? importance + start : nullptr, kMaxLevel, quantized);
    uint8_t* block = blocks + b * block_bytes;
    encode_scale_min_block(quantized, block, block + kLevelsOffset, nullptr);
  }
}

}  // namespace strata::quant_k
