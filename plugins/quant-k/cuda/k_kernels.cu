// Q4_K, Q5_K and Q6_K block decoders for the SDK's CUDA kernels. Each decodes exactly as the CPU
// dequantizer (k_common.cpp, q6_k.cpp): the same products and differences, rounded one at a time.
#include "cuda/k_cuda.hpp"
#include "strata/cuda/block_kernels.cuh"

namespace strata::quant_k::cuda {
namespace {

using sdk::cuda::load_f16;
using sdk::cuda::load_f16_aligned2;
using sdk::cuda::load_words_aligned2;

// Sub-block j's 6-bit scale and min codes from the 12 packed bytes of a Q4_K / Q5_K header (k_common.hpp).
struct ScaleMinCode {
  int scale, min;
};
__device__ inline ScaleMinCode scale_min_code(const uint8_t* packed, int j) {
  if (j < 4) return {packed[j] & 63, packed[j + 4] & 63};
  return {(packed[j + 4] & 15) | ((packed[j - 4] >> 6) << 4), (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4)};
}

// 256 values: f16 d and dmin, 12 bytes of codes, optional fifth bits qh[32], then qs[128] in 4 chunks of
// 64 values (the first 32 in the low nibbles). A chunk of 8 values lies in one 32-value sub-block.
template <int kBlockBytes, bool kFifthBit>
struct ScaleMinDecoder {
  static constexpr int block_elements = 256, block_bytes = kBlockBytes;
  __device__ static void decode8(const uint8_t* block, int chunk, float* values) {
    const int chunk64 = chunk / 8, is_high = (chunk % 8) / 4, first = 8 * (chunk % 4);
    const ScaleMinCode code = scale_min_code(block + 4, 2 * chunk64 + is_high);
    const float scale = __fmul_rn(load_f16(block), static_cast<float>(code.scale));
    const float min = __fmul_rn(load_f16(block + 2), static_cast<float>(code.min));
    const uint8_t* qh = block + 16;
    const uint8_t* qs = block + (kFifthBit ? 48 : 16) + 32 * chunk64;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int l = first + i;
      int level = (qs[l] >> (4 * is_high)) & 15;
      if (kFifthBit) level |= ((qh[l] >> (2 * chunk64 + is_high)) & 1) << 4;
      values[i] = __fsub_rn(__fmul_rn(scale, static_cast<float>(level)), min);
    }
  }
  // A group of 32 values is one sub-block: value = scale * level - min.
  static constexpr bool q8_has_min = true;
  __device__ static void unpack32(const uint8_t* block, int group, int32_t* levels, float* d, float& m) {
    const int chunk64 = group / 2, is_high = group % 2;
    const ScaleMinCode code = scale_min_code(block + 4, group);
    d[0] = d[1] = __fmul_rn(load_f16(block), static_cast<float>(code.scale));
    m = __fmul_rn(load_f16(block + 2), static_cast<float>(code.min));
    uint32_t nibbles[8], fifth_bits[8] = {};
    load_words_aligned2(block + (kFifthBit ? 48 : 16) + 32 * chunk64, nibbles);
    if (kFifthBit) load_words_aligned2(block + 16, fifth_bits);
#pragma unroll
    for (int word = 0; word < 8; ++word) {
      uint32_t level = (nibbles[word] >> (4 * is_high)) & 0x0f0f0f0fu;
      if (kFifthBit) level |= ((fifth_bits[word] >> group) & 0x01010101u) << 4;
      levels[word] = static_cast<int32_t>(level);
    }
  }
};
using Q4KDecoder = ScaleMinDecoder<144, false>;
using Q5KDecoder = ScaleMinDecoder<176, true>;

// 256 values in 210 bytes: low 4 bits [128], high 2 bits [64], int8 scales [16], f16 d. In each half of
// 128 values, value l + 32k keeps its low bits in low[l + 32(k&1)] (nibble k/2) and its high bits at bit 2k
// of high[l]. A chunk of 8 values shares k and one 16-value scale.
struct Q6KDecoder {
  static constexpr int block_elements = 256, block_bytes = 210;
  __device__ static void decode8(const uint8_t* block, int chunk, float* values) {
    const int half = chunk / 16, first = 8 * (chunk % 16);
    const int k = first / 32, l0 = first % 32;
    const uint8_t* low_bits = block + 64 * half + 32 * (k & 1);
    const uint8_t* high_bits = block + 128 + 32 * half;
    const auto scale = static_cast<int8_t>(block[192 + 8 * half + first / 16]);
    const float step = __fmul_rn(load_f16(block + 208), static_cast<float>(scale));
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int l = l0 + i;
      const int level = (((low_bits[l] >> (4 * (k >> 1))) & 15) | (((high_bits[l] >> (2 * k)) & 3) << 4)) - 32;
      values[i] = __fmul_rn(step, static_cast<float>(level));
    }
  }
  // A group of 32 values shares low nibble and high bit positions, with a scale per 16.
  static constexpr bool q8_has_min = false;
  __device__ static void unpack32(const uint8_t* block, int group, int32_t* levels, float* d, float&) {
    const int half = group / 4, k = group % 4;
    uint32_t low_bits[8], high_bits[8];
    load_words_aligned2(block + 64 * half + 32 * (k & 1), low_bits);
    load_words_aligned2(block + 128 + 32 * half, high_bits);
    const float block_scale = load_f16_aligned2(block + 208);
    // The group's two int8 scales are one aligned half-word.
    const uint32_t scales = *reinterpret_cast<const uint16_t*>(block + 192 + 8 * half + 2 * k);
    d[0] = __fmul_rn(block_scale, static_cast<float>(static_cast<int8_t>(scales & 0xffu)));
    d[1] = __fmul_rn(block_scale, static_cast<float>(static_cast<int8_t>(scales >> 8)));
#pragma unroll
    for (int word = 0; word < 8; ++word) {
      const uint32_t low = (low_bits[word] >> (4 * (k >> 1))) & 0x0f0f0f0fu;
      const uint32_t high = ((high_bits[word] >> (2 * k)) & 0x03030303u) << 4;
      levels[word] = static_cast<int32_t>(__vsub4(low | high, 0x20202020u));
    }
  }
};

}  // namespace

STRATA_DEFINE_CUDA_LAUNCHERS(q4_k, Q4KDecoder)
STRATA_DEFINE_CUDA_LAUNCHERS(q5_k, Q5KDecoder)
STRATA_DEFINE_CUDA_LAUNCHERS(q6_k, Q6KDecoder)

}  // namespace strata::quant_k::cuda
