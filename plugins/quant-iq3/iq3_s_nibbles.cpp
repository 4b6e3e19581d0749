#include "iq3_s_nibbles.hpp"

#include <cstring>
#include <vector>

#include "iq3_quantizer.hpp"
#include "iq3_s.hpp"
#include "iq3_tables.hpp"
#include "strata/half.hpp"

namespace strata::iq3 {
namespace {

constexpr int kScalesOffset = Iq3SNibblesCodec::scales_offset;
constexpr int kLevelsOffset = Iq3SNibblesCodec::levels_offset;
constexpr int kLevelBytesPerSubBlock = Iq3SNibblesCodec::level_bytes_per_sub_block;
static_assert(kLevelBytesPerSubBlock == kSubBlockValues / 2);

// kGroupNibbles[index * 16 + signs]: a 4-value group's k nibbles (m = 2k + 1), one in the low half of each byte,
// for each grid point and sign pattern; built once, so that repacking a model's ~10^8 blocks takes seconds.
struct GroupNibbles {
  uint32_t words[512 * 16];
  GroupNibbles() {
    for (int index = 0; index < 512; ++index) {
      for (int signs = 0; signs < 16; ++signs) {
        uint32_t word = 0;
        for (int j = 0; j < 4; ++j) {
          const int magnitude = static_cast<int>((kIq3SGrid[index] >> (8 * j)) & 0xffu);
          const int level = (signs >> j) & 1 ? -magnitude : magnitude;
          word |= static_cast<uint32_t>(((level - 1) / 2) & 0xf) << (8 * j);  // levels are odd: k = -8..7, exactly
        }
        words[index * 16 + signs] = word;
      }
    }
  }
  uint32_t of(const uint8_t* block, int group) const {
    return words[Iq3SCodec::grid_index(block, group) * 16 + Iq3SCodec::group_signs(block, group)];
  }
};

}  // namespace

void repack_iq3_s(const uint8_t* blocks, uint8_t* out, int64_t n_blocks) {
  static const GroupNibbles nibbles;
  constexpr int kGroupsPerHalf = kSubBlockValues / 2 / kGroupValues;  // values 0..15 of a sub-block: 4 groups
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* from = blocks + b * Iq3SCodec::block_bytes;
    uint8_t* to = out + b * Iq3SNibblesCodec::block_bytes;
    uint32_t scales = 0;
    for (int ib = 0; ib < kSubBlocks; ++ib)
      scales |= static_cast<uint32_t>(Iq3SCodec::scale_nibble(from, ib)) << (4 * ib);
    std::memcpy(to, from, 2);  // d
    std::memset(to + 2, 0, 2);
    std::memcpy(to + kScalesOffset, &scales, 4);
    for (int ib = 0; ib < kSubBlocks; ++ib) {
      for (int g = 0; g < kGroupsPerHalf; ++g) {
        const int low = ib * kGroupsPerSubBlock + g;  // values 4g..4g+3; its partner group holds 16 values on
        const uint32_t word = nibbles.of(from, low) | nibbles.of(from, low + kGroupsPerHalf) << 4;
        std::memcpy(to + kLevelsOffset + kLevelBytesPerSubBlock * ib + 4 * g, &word, 4);
      }
    }
  }
}

void Iq3SNibblesCodec::dequantize(const uint8_t* blocks, float* out, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = blocks + b * block_bytes;
    const float d = sdk::fp16_to_fp32(load_u16(block));
    for (int ib = 0; ib < kSubBlocks; ++ib) {
      // IQ3_S's float operations, in its order: d * (1 + 2l), then times the signed grid byte.
      const float sub_scale = d * static_cast<float>(1 + 2 * scale_nibble(block, ib));
      for (int i = 0; i < kSubBlockValues; ++i) *out++ = sub_scale * static_cast<float>(level(block, ib, i));
    }
  }
}

void Iq3SNibblesCodec::quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float* importance) {
  std::vector<uint8_t> iq3_s(static_cast<size_t>(n_per_row / block_elements * Iq3SCodec::block_bytes));
  Iq3SCodec::quantize_row(src, iq3_s.data(), n_per_row, importance);
  repack_iq3_s(iq3_s.data(), blocks, n_per_row / block_elements);
}

}  // namespace strata::iq3
