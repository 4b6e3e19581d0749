// Shared machinery of the IQ3_XXS and IQ3_S codecs.
//
// Both formats store 256 values as 8 sub-blocks of 32: each group of 4 values is one point of a fixed grid of
// unsigned magnitudes, signs are stored separately, each sub-block has a 4-bit scale l and the block one f16
// scale d. A value decodes to d * (2l + 1) * magnitude * sign (the formats differ in grid, sign and bit layout).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace strata::iq3 {

constexpr int kBlockValues = 256;
constexpr int kSubBlockValues = 32;
constexpr int kSubBlocks = kBlockValues / kSubBlockValues;
constexpr int kGroupValues = 4;  // values per grid point
constexpr int kGroupsPerSubBlock = kSubBlockValues / kGroupValues;
constexpr int kSignGroupValues = 8;  // values per sign byte

inline uint16_t load_u16(const uint8_t* bytes) {
  uint16_t value;
  std::memcpy(&value, bytes, sizeof value);
  return value;
}

inline uint32_t load_u32(const uint8_t* bytes) {
  uint32_t value;
  std::memcpy(&value, bytes, sizeof value);
  return value;
}

// One format's grid as the quantizer searches it.
class Grid {
 public:
  // points: the format's table (4 bytes per point, lowest byte first); byte_unit: stored byte per unit of
  // magnitude (the byte values are byte_unit * (1, 3, ..., 15) give or take rounding); shells: how many
  // distinct distances of nearest points an off-grid code considers.
  Grid(std::span<const uint32_t> points, int byte_unit, int shells);

  const float* magnitudes(int point) const { return &magnitudes_[kGroupValues * point]; }

  // The point whose magnitudes times scale are nearest to xval[0..3] in weighted squared error, among the
  // points near the per-value rounding of xval / scale. inverse_scale is 1 / scale.
  int nearest(const float* xval, const float* weight, float scale, float inverse_scale) const;

 private:
  static constexpr int kLevels = 8;  // magnitudes 1, 3, ..., 15: 3 bits per value
  static constexpr int kCodes = 1 << (3 * kGroupValues);

  std::vector<float> magnitudes_;
  // The candidate points of code c (4 levels, 3 bits each) are candidates_[first_[c] .. first_[c + 1]):
  // the point itself when the code is on the grid, else its nearest points.
  std::vector<uint32_t> first_;
  std::vector<uint16_t> candidates_;
};

enum class SignRule {
  kFree,        // IQ3_S: 8 sign bits per 8 values
  kEvenParity,  // IQ3_XXS: 7 bits stored, the 8th makes the count of negatives even
};

// A block's choices, before the format packs them into bits.
struct BlockPlan {
  uint16_t d_bits = 0;  // f16 super-block scale
  uint8_t scale_nibbles[kSubBlocks] = {};
  uint16_t points[kBlockValues / kGroupValues] = {};
  uint8_t sign_masks[kBlockValues / kSignGroupValues] = {};  // bit i set: value i of the group is negative
};

// Quantizes 256 values, minimizing the squared error weighted by importance (n = 256 weights, or nullptr).
BlockPlan plan_block(const Grid& grid, SignRule sign_rule, const float* x, const float* importance);

}  // namespace strata::iq3
