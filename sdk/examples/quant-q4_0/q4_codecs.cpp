#include "q4_codecs.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "strata/half.hpp"

namespace quant_q4 {
namespace {

constexpr int kValues = 32;
constexpr int kCodeBytes = 16;

float read_half(const uint8_t* at) {
  uint16_t bits;
  std::memcpy(&bits, at, sizeof bits);
  return strata::sdk::fp16_to_fp32(bits);
}

void write_half(uint8_t* at, float value) {
  const uint16_t bits = strata::sdk::fp32_to_fp16(value);
  std::memcpy(at, &bits, sizeof bits);
}

// Byte j holds value j in its low nibble and value j + 16 in its high nibble.
int code_at(const uint8_t* codes, int index) {
  const uint8_t byte = codes[index % kCodeBytes];
  return index < kCodeBytes ? (byte & 0x0f) : (byte >> 4);
}

void pack_codes(const int (&values)[kValues], uint8_t* codes) {
  for (int j = 0; j < kCodeBytes; ++j) codes[j] = static_cast<uint8_t>(values[j] | (values[j + kCodeBytes] << 4));
}

int clamp_code(float scaled) { return std::clamp(static_cast<int>(scaled), 0, 15); }

}  // namespace

void Q4_0Codec::dequantize(const uint8_t* blocks, float* out, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = blocks + b * block_bytes;
    const float d = read_half(block);
    for (int i = 0; i < kValues; ++i) out[b * kValues + i] = static_cast<float>(code_at(block + 2, i) - 8) * d;
  }
}

// The reference rounding: the value of largest magnitude maps to code 0 (d = that value / -8), so the
// signed range [-8, 7] is used asymmetrically toward that value's sign. importance is not used.
void Q4_0Codec::quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float*) {
  for (int64_t b = 0; b < n_per_row / kValues; ++b) {
    const float* x = src + b * kValues;
    uint8_t* block = blocks + b * block_bytes;
    float extreme = 0.0f;
    for (int i = 0; i < kValues; ++i) {
      if (std::fabs(x[i]) > std::fabs(extreme)) extreme = x[i];
    }
    const float d = extreme / -8.0f;
    write_half(block, d);
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    int codes[kValues];
    for (int i = 0; i < kValues; ++i) codes[i] = clamp_code(x[i] * inverse + 8.5f);
    pack_codes(codes, block + 2);
  }
}

void Q4_1Codec::dequantize(const uint8_t* blocks, float* out, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = blocks + b * block_bytes;
    const float d = read_half(block);
    const float m = read_half(block + 2);
    for (int i = 0; i < kValues; ++i) out[b * kValues + i] = static_cast<float>(code_at(block + 4, i)) * d + m;
  }
}

// Codes 0..15 span [min, max] of the block; importance is not used.
void Q4_1Codec::quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float*) {
  for (int64_t b = 0; b < n_per_row / kValues; ++b) {
    const float* x = src + b * kValues;
    uint8_t* block = blocks + b * block_bytes;
    const auto [low, high] = std::minmax_element(x, x + kValues);
    const float d = (*high - *low) / 15.0f;
    write_half(block, d);
    write_half(block + 2, *low);
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    int codes[kValues];
    for (int i = 0; i < kValues; ++i) codes[i] = clamp_code((x[i] - *low) * inverse + 0.5f);
    pack_codes(codes, block + 4);
  }
}

}  // namespace quant_q4
