#include "iq3_s.hpp"

#include <cstring>

#include "iq3_quantizer.hpp"
#include "iq3_tables.hpp"
#include "strata/half.hpp"

namespace strata::iq3 {
namespace {

const Grid& s_grid() {
  // Byte values are 1, 3, ..., 15; the denser grid gets three distance shells around an off-grid code.
  static const Grid grid(kIq3SGrid, 1, 3);
  return grid;
}

}  // namespace

void Iq3SCodec::signed_levels(const uint8_t* block, int8_t* levels) {
  for (int g = 0; g < kBlockValues / kGroupValues; ++g) {
    const uint32_t point = kIq3SGrid[grid_index(block, g)];
    const int signs = group_signs(block, g);
    for (int j = 0; j < kGroupValues; ++j) {
      const auto magnitude = static_cast<int8_t>((point >> (8 * j)) & 0xffu);
      *levels++ = (signs >> j) & 1 ? static_cast<int8_t>(-magnitude) : magnitude;
    }
  }
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
      for (int i = 0; i < kSubBlockValues; ++i)
        *out++ = sub_scale * static_cast<float>(levels[ib * kSubBlockValues + i]);
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
      block[qs_offset + g] = static_cast<uint8_t>(plan.points[g] & 0xff);
      block[qh_offset + g / kGroupsPerSubBlock] |=
          static_cast<uint8_t>((plan.points[g] >> 8) << (g % kGroupsPerSubBlock));
    }
    std::memcpy(block + signs_offset, plan.sign_masks, sizeof plan.sign_masks);
    for (int ib = 0; ib < kSubBlocks; ++ib) {
      block[scales_offset + ib / 2] |= static_cast<uint8_t>(plan.scale_nibbles[ib] << (4 * (ib % 2)));
    }
  }
}

}  // namespace strata::iq3
