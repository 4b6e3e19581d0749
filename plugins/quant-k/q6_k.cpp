#include "q6_k.hpp"

#include <algorithm>
#include <limits>

#include "k_common.hpp"
#include "strata/half.hpp"

namespace strata::quant_k {
namespace {

constexpr int kLowBitsOffset = 0;
constexpr int kHighBitsOffset = 128;
constexpr int kScalesOffset = 192;
constexpr int kDOffset = 208;
constexpr int kSubBlocks = 16;
constexpr int kSubBlockSize = 16;
constexpr int kLevelBias = 32;  // stored levels 0..63 mean -32..31
constexpr int kMinScale = -128, kMaxScale = 127;

// Layout of each half (128 values): value l + 32k (l < 32, k < 4) keeps its low 4 bits in
// low_bits[l + 32 * (k & 1)] (low nibble for k < 2, high nibble otherwise) and its top 2 bits at bit 2k of
// high_bits[l].
void pack_levels(const int* levels, uint8_t* block) {
  for (int half = 0; half < 2; ++half) {
    uint8_t* low_bits = block + kLowBitsOffset + 64 * half;
    uint8_t* high_bits = block + kHighBitsOffset + 32 * half;
    const int* v = levels + 128 * half;
    for (int l = 0; l < 32; ++l) {
      int stored[4];
      for (int k = 0; k < 4; ++k) stored[k] = v[l + 32 * k] + kLevelBias;
      low_bits[l] = static_cast<uint8_t>((stored[0] & 15) | ((stored[2] & 15) << 4));
      low_bits[l + 32] = static_cast<uint8_t>((stored[1] & 15) | ((stored[3] & 15) << 4));
      high_bits[l] = static_cast<uint8_t>((stored[0] >> 4) | ((stored[1] >> 4) << 2) | ((stored[2] >> 4) << 4) |
                                          ((stored[3] >> 4) << 6));
    }
  }
}

// With d fixed, tries the int8 scales next to a sub-block's rounded one and keeps the one, and levels, of
// least weighted error.
int8_t refine_sub_block(const float* x, const float* w, float d, int scale_code, int* levels) {
  int trial[kSubBlockSize];
  float best_error = std::numeric_limits<float>::infinity();
  int best_code = scale_code;
  for (int code = std::max(scale_code - 1, kMinScale); code <= std::min(scale_code + 1, kMaxScale); ++code) {
    const float step = d * static_cast<float>(code);
    const float inverse = step != 0.0f ? 1.0f / step : 0.0f;
    float error = 0.0f;
    for (int i = 0; i < kSubBlockSize; ++i) {
      trial[i] = round_clamp(x[i] * inverse, -kLevelBias, kLevelBias - 1);
      const float diff = step * static_cast<float>(trial[i]) - x[i];
      error += w[i] * diff * diff;
    }
    if (error < best_error) {
      best_error = error;
      best_code = code;
      std::copy_n(trial, kSubBlockSize, levels);
    }
  }
  return static_cast<int8_t>(best_code);
}

}  // namespace

void Q6KCodec::dequantize(const uint8_t* blocks, float* out, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = blocks + b * block_bytes;
    const float d = sdk::fp16_to_fp32(load_u16(block + kDOffset));
    const auto* scales = reinterpret_cast<const int8_t*>(block + kScalesOffset);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* low_bits = block + kLowBitsOffset + 64 * half;
      const uint8_t* high_bits = block + kHighBitsOffset + 32 * half;
      float* y = out + b * kSuperBlock + 128 * half;
      for (int l = 0; l < 32; ++l) {
        for (int k = 0; k < 4; ++k) {
          const int low = (low_bits[l + 32 * (k & 1)] >> (4 * (k >> 1))) & 15;
          const int level = (low | (((high_bits[l] >> (2 * k)) & 3) << 4)) - kLevelBias;
          const int index = l + 32 * k;
          // (d * scale) * level, in the reference's order.
          y[index] = d * static_cast<float>(scales[8 * half + index / kSubBlockSize]) * static_cast<float>(level);
        }
      }
    }
  }
}

void Q6KCodec::quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float* importance) {
  for (int64_t b = 0; b < n_per_row / kSuperBlock; ++b) {
    const float* x = src + b * kSuperBlock;
    uint8_t* block = blocks + b * block_bytes;
    float w[kSuperBlock];
    error_weights(x, importance != nullptr ? importance + b * kSuperBlock : nullptr, kSubBlockSize, w);

    int levels[kSuperBlock];
    float scales[kSubBlocks], sub_weights[kSubBlocks];
    for (int j = 0; j < kSubBlocks; ++j) {
      const int start = j * kSubBlockSize;
      scales[j] = fit_scale(x + start, w + start, kSubBlockSize, -kLevelBias, kLevelBias - 1, levels + start);
      sub_weights[j] = 0.0f;
      for (int i = start; i < start + kSubBlockSize; ++i) sub_weights[j] += w[i];
    }
    // The sub-block scales themselves become int8 codes of one f16 step, fitted the same way.
    int codes[kSubBlocks];
    const uint16_t d_bits = sdk::fp32_to_fp16(fit_scale(scales, sub_weights, kSubBlocks, kMinScale, kMaxScale, codes));
    const float d = sdk::fp16_to_fp32(d_bits);
    auto* stored_scales = reinterpret_cast<int8_t*>(block + kScalesOffset);
    for (int j = 0; j < kSubBlocks; ++j) {
      const int rounded = d != 0.0f ? round_clamp(scales[j] / d, kMinScale, kMaxScale) : 0;
      const int start = j * kSubBlockSize;
      stored_scales[j] = refine_sub_block(x + start, w + start, d, rounded, levels + start);
    }
    pack_levels(levels, block);
    store_u16(block + kDOffset, d_bits);
  }
}

}  // namespace strata::quant_k
