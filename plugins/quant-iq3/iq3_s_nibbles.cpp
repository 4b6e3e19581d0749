#include "iq3_s_nibbles.hpp"

#include <cstring>
#include <vector>

#include "iq3_quantizer.hpp"
#include "iq3_s.hpp"
#include "iq3_tables.hpp"
#include "strata/half.hpp"

namespace strata::iq3 {
namespace {

constexpr int kScalesOffset = 4;
constexpr int kLevelsOffset = 8;
constexpr int kLevelBytesPerSubBlock = kSubBlockValues / 2;

}  // namespace

void repack_iq3_s(const uint8_t* blocks, uint8_t* out, int64_t n_blocks) {
  int8_t levels[kBlockValues];
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* from = blocks + b * Iq3SCodec::block_bytes;
    uint8_t* to = out + b * Iq3SNibblesCodec::block_bytes;
    std::memset(to, 0, Iq3SNibblesCodec::block_bytes);
    std::memcpy(to, from, 2);  // d
    Iq3SCodec::signed_levels(from, levels);
    for (int ib = 0; ib < kSubBlocks; ++ib) {
      to[kScalesOffset + ib / 2] |= static_cast<uint8_t>(Iq3SCodec::scale_nibble(from, ib) << (4 * (ib % 2)));
      for (int i = 0; i < kSubBlockValues; ++i) {
        const int k = (levels[ib * kSubBlockValues + i] - 1) / 2;  // levels are odd: k = -8..7, exactly
        to[kLevelsOffset + kLevelBytesPerSubBlock * ib + i % 16] |= static_cast<uint8_t>((k & 0xf) << (4 * (i / 16)));
      }
    }
  }
}

void Iq3SNibblesCodec::dequantize(const uint8_t* blocks, float* out, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = blocks + b * block_bytes;
    const float d = sdk::fp16_to_fp32(load_u16(block));
    const uint32_t scales = load_u32(block + kScalesOffset);
    for (int ib = 0; ib < kSubBlocks; ++ib) {
      // IQ3_S's float operations, in its order: d * (1 + 2l), then times the signed grid byte.
      const float sub_scale = d * static_cast<float>(1 + 2 * ((scales >> (4 * ib)) & 0xf));
      const uint8_t* levels = block + kLevelsOffset + kLevelBytesPerSubBlock * ib;
      for (int i = 0; i < kSubBlockValues; ++i) {
        const int nibble = (levels[i % 16] >> (4 * (i / 16))) & 0xf;
        const int k = nibble >= 8 ? nibble - 16 : nibble;
        *out++ = sub_scale * static_cast<float>(2 * k + 1);
      }
    }
  }
}

void Iq3SNibblesCodec::quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float* importance) {
  std::vector<uint8_t> iq3_s(static_cast<size_t>(n_per_row / block_elements * Iq3SCodec::block_bytes));
  Iq3SCodec::quantize_row(src, iq3_s.data(), n_per_row, importance);
  repack_iq3_s(iq3_s.data(), blocks, n_per_row / block_elements);
}

}  // namespace strata::iq3
