#include "iq3_s.hpp"

#include <cstring>

#include "iq3_quantizer.hpp"
#include "iq3_tables.hpp"
#include "strata/half.hpp"

namespace strata::iq3 {
namespace {

// Byte offsets inside a block.
constexpr int kQsOffset = 2;
constexpr int kQhOffset = kQsOffset + kBlockValues / kGroupValues;       // 66
constexpr int kSignsOffset = kQhOffset + kSubBlocks;                    // 74
constexpr int kScalesOffset = kSignsOffset + kBlockValues / kSignGroupValues;  // 106
constexpr int kSignBytesPerSubBlock = kSubBlockValues / kSignGroupValues;

const Grid& s_grid() {
  // Byte values are 1, 3, ..., 15; the denser grid gets three distance shells around an off-grid code.
  static const Grid grid(kIq3SGrid, 1, 3);
  return grid;
}

}  // namespace

void Iq3SCodec::signed_levels(const uint8_t* block, int8_t* levels) {
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    const uint8_t high_bits = block[kQhOffset + ib];
    for (int g = 0; g < kGroupsPerSubBlock; ++g) {
      const int index = block[kQsOffset + kGroupsPerSubBlock * ib + g] | (((high_bits >> g) & 1) << 8);
      const uint32_t point = kIq3SGrid[index];
      const uint8_t signs = block[kSignsOffset + kSignBytesPerSubBlock * ib + g / 2];
      for (int j = 0; j < kGroupValues; ++j) {
        const auto magnitude = static_cast<int8_t>((point >> (8 * j)) & 0xffu);
        *levels++ = (signs & kMaskIq2xs[kGroupValues * (g % 2) + j]) ? static_cast<int8_t>(-magnitude) : magnitude;
      }
    }
  }
}

int Iq3SCodec::scale_nibble(const uint8_t* block, int sub_block) {
  return (block[kScalesOffset + sub_block / 2] >> (4 * (sub_block % 2))) & 0xf;
}

void Iq3SCodec::dequantize(const uint8_t* blocks, float* out, int64_t n_blocks) {
  int8_t levels[kBlockValues];
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = blocks + b * block_bytes;
    const float d = sdk::fp16_to_fp32(load_u16(block));
    signed_levels(block, levels);
    for (int ib = 0; ib < kSubBlocks; ++ib) {
      // Same float operations, in the same order, as the reference decoder (a sign flips the exact product).
      const float sub_scale = d * static_cast<float>(1 + 2 * scale_nibble(block, ib));
      for (int i = 0; i < kSubBlockValues; ++i) *out++ = sub_scale * static_cast<float>(levels[ib * kSubBlockValues + i]);
    }
  }
}

void Iq3SCodec::quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float* importance) {
  for (int64_t b = 0; b < n_per_row / block_elements; ++b) {
    const BlockPlan plan = plan_block(s_grid(), SignRule::kFree, src + b * block_elements,
                                      importance ? importance + b * block_elements : nullptr);
    uint8_t* block = blocks + b * block_bytes;
    std::memset(block, 0, block_bytes);
    std::memcpy(block, &plan.d_bits, 2);
    for (int g = 0; g < kBlockValues / kGroupValues; ++g) {
      block[kQsOffset + g] = static_cast<uint8_t>(plan.points[g] & 0xff);
      block[kQhOffset + g / kGroupsPerSubBlock] |= static_cast<uint8_t>((plan.points[g] >> 8) << (g % kGroupsPerSubBlock));
    }
    std::memcpy(block + kSignsOffset, plan.sign_masks, sizeof plan.sign_masks);
    for (int ib = 0; ib < kSubBlocks; ++ib) {
      block[kScalesOffset + ib / 2] |= static_cast<uint8_t>(plan.scale_nibbles[ib] << (4 * (ib % 2)));
    }
  }
}

}  // namespace strata::iq3
