#include "iq3_xxs.hpp"

#include <cstring>

#include "iq3_quantizer.hpp"
#include "iq3_tables.hpp"
#include "strata/half.hpp"

namespace strata::iq3 {
namespace {

constexpr int kIndexBytes = kBlockValues / kGroupValues;  // 64
constexpr int kSignBitsPerGroup = 7;
constexpr int kSignGroupsPerSubBlock = kSubBlockValues / kSignGroupValues;
constexpr int kNibbleShift = 28;

const Grid& xxs_grid() {
  // Byte values are 4 * (1, 3, ..., 13) and 62; two distance shells around an off-grid code suffice.
  static const Grid grid(kIq3XxsGrid, 4, 2);
  return grid;
}

}  // namespace

void Iq3XxsCodec::dequantize(const uint8_t* blocks, float* out, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = blocks + b * block_bytes;
    const float d = sdk::fp16_to_fp32(load_u16(block));
    const uint8_t* indices = block + 2;
    const uint8_t* signs_and_scales = indices + kIndexBytes;
    for (int ib = 0; ib < kSubBlocks; ++ib) {
      const uint32_t packed = load_u32(signs_and_scales + 4 * ib);
      // Same float operations, in the same order, as the reference decoder.
      const float sub_scale = d * (0.5f + static_cast<float>(packed >> kNibbleShift)) * 0.5f;
      for (int sign_group = 0; sign_group < kSignGroupsPerSubBlock; ++sign_group) {
        const uint8_t signs = kSignsIq2xs[(packed >> (kSignBitsPerGroup * sign_group)) & 127];
        for (int half = 0; half < 2; ++half) {
          const uint32_t point = kIq3XxsGrid[indices[8 * ib + 2 * sign_group + half]];
          for (int j = 0; j < kGroupValues; ++j) {
            const float value = sub_scale * static_cast<float>((point >> (8 * j)) & 0xffu);
            *out++ = (signs & kMaskIq2xs[kGroupValues * half + j]) ? -value : value;
          }
        }
      }
    }
  }
}

void Iq3XxsCodec::quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float* importance) {
  for (int64_t b = 0; b < n_per_row / block_elements; ++b) {
    const BlockPlan plan = plan_block(xxs_grid(), SignRule::kEvenParity, src + b * block_elements,
                                      importance ? importance + b * block_elements : nullptr);
    uint8_t* block = blocks + b * block_bytes;
    std::memcpy(block, &plan.d_bits, 2);
    uint8_t* indices = block + 2;
    for (int g = 0; g < kIndexBytes; ++g) indices[g] = static_cast<uint8_t>(plan.points[g]);
    for (int ib = 0; ib < kSubBlocks; ++ib) {
      uint32_t packed = static_cast<uint32_t>(plan.scale_nibbles[ib]) << kNibbleShift;
      for (int sign_group = 0; sign_group < kSignGroupsPerSubBlock; ++sign_group) {
        // The masks have even parity, so the 8th bit is implied by the other 7.
        const uint32_t mask = plan.sign_masks[kSignGroupsPerSubBlock * ib + sign_group] & 127u;
        packed |= mask << (kSignBitsPerGroup * sign_group);
      }
      std::memcpy(indices + kIndexBytes + 4 * ib, &packed, 4);
    }
  }
}

}  // namespace strata::iq3
