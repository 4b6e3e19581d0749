// What the k-quant formats share: 256-value super-blocks, the error weighting and scale searches of the
// quantizer, and the Q4_K / Q5_K super-block (f16 d and dmin, eight 6-bit scales and mins packed into 12
// bytes, one level per value).
#pragma once

#include <cstdint>
#include <cstring>

namespace strata::quant_k {

inline constexpr int kSuperBlock = 256;

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// Rounds to the nearest integer (ties to even) and clamps to [lo, hi]; NaN goes to lo.
inline int round_clamp(float v, int lo, int hi) {
  // Selects rather than branches, so that the search loops vectorize; NaN fails the first test.
  const float low = static_cast<float>(lo), high = static_cast<float>(hi);
  v = v > low ? v : low;
  v = v < high ? v : high;
  // Adding 1.5 * 2^23 leaves no fraction bits, so the FPU rounds to nearest even; exact for |v| < 2^22.
  constexpr float kMagic = 12582912.0f;
  return static_cast<int>((v + kMagic) - kMagic);
}

// Fills w[0..255] with how much each value's squared error matters: sqrt(sigma^2 + x^2) (sigma^2 the
// super-block's mean square), so large values count a little more, times importance[i] when given.
// A group of `group` values whose importance is all zero gets the plain weights: the fit still needs some.
void error_weights(const float* x, const float* importance, int group, float* w);

// Fits x ~ scale * level with integer levels in [lo, hi], minimizing the weighted squared error; writes
// the levels and returns the scale (0 when x is all zero). The scale may be negative, so that the value of
// largest magnitude can use whichever end of [lo, hi] reaches further.
float fit_scale(const float* x, const float* w, int n, int lo, int hi, int* levels);

// Fits x ~ scale * level - min with levels in [0, nmax], scale >= 0 and min >= 0 (the Q4_K / Q5_K form).
struct ScaleMin {
  float scale = 0.0f;
  float min = 0.0f;
};
ScaleMin fit_scale_min(const float* x, const float* w, int n, int nmax, uint8_t* levels);

// The Q4_K / Q5_K super-block header: d @0, dmin @2, 12 bytes of packed 6-bit codes @4.
inline constexpr int kScaleMinHeaderBytes = 16;
inline constexpr int kScaleMinSubBlocks = 8;
inline constexpr int kScaleMinSubBlockSize = 32;

// Sub-block j's scale is d * scale_code[j] and its min dmin * min_code[j]. Codes 0-3 sit in the low 6 bits
// of bytes 0-3 (scales) and 4-7 (mins); codes 4-7 keep their low 4 bits in the nibbles of bytes 8-11 and
// their top 2 bits in the spare top bits of bytes 0-3 (scales) and 4-7 (mins).
struct ScaleMinCodes {
  uint8_t scale[kScaleMinSubBlocks];
  uint8_t min[kScaleMinSubBlocks];
};
void pack_scale_min_codes(const ScaleMinCodes& codes, uint8_t* packed);
ScaleMinCodes unpack_scale_min_codes(const uint8_t* packed);

// A quantized Q4_K / Q5_K super-block before its levels are packed.
struct ScaleMinBlock {
  uint16_t d_bits = 0;
  uint16_t dmin_bits = 0;
  ScaleMinCodes codes{};
  uint8_t levels[kSuperBlock];
};
// Quantizes 256 values to levels in [0, nmax] (15 for Q4_K, 31 for Q5_K).
void quantize_scale_min_block(const float* x, const float* importance, int nmax, ScaleMinBlock& out);

// Writes the header and the low 4 bits of each level (qs: 4 chunks of 64 values, each 32 bytes with the
// chunk's first 32 levels in the low nibbles and the next 32 in the high nibbles). When qh is given (Q5_K)
// it receives the fifth bits: bit 2c of qh[l] for level 64c + l, bit 2c+1 for level 64c + 32 + l.
void encode_scale_min_block(const ScaleMinBlock& block, uint8_t* header, uint8_t* qs, uint8_t* qh);

// Decodes one such super-block into 256 floats, with the reference dequantizer's float operations:
// (d * scale_code) * level - (dmin * min_code). qh is null for Q4_K.
void decode_scale_min_block(const uint8_t* header, const uint8_t* qs, const uint8_t* qh, float* out);

}  // namespace strata::quant_k
