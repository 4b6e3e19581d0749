#include "k_common.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "strata/half.hpp"

namespace strata::quant_k {
namespace {

constexpr int kMaxGroup = 32;
constexpr int kMaxCode = 63;  // 6-bit sub-block scale and min codes
// Each search tries start scales that map the widest value to the end of the level range plus kFirstStep,
// kFirstStep + kStepSize, ... (up to one level beyond), then alternates "fit the scale to the levels" and
// "round to the new scale" a few times from each.
constexpr float kFirstStep = -1.0f;
constexpr float kStepSize = 0.1f;
constexpr int kSteps = 20;
constexpr int kRefinements = 3;

float weighted_error(const float* x, const float* w, int n, float scale, float min, const uint8_t* levels) {
  float error = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float diff = scale * static_cast<float>(levels[i]) - min - x[i];
    error += w[i] * diff * diff;
  }
  return error;
}

// Codes for n non-negative values v ~ step * code with codes in [0, max_code], the step stored as f16.
// Returns the f16 bits of the step; the codes are recomputed for the step as stored.
uint16_t quantize_codes(const float* v, const float* w, int n, int max_code, uint8_t* codes) {
  int fitted[kMaxGroup];
  const uint16_t step_bits = sdk::fp32_to_fp16(fit_scale(v, w, n, 0, max_code, fitted));
  const float step = sdk::fp16_to_fp32(step_bits);
  for (int j = 0; j < n; ++j) codes[j] = step > 0.0f ? static_cast<uint8_t>(round_clamp(v[j] / step, 0, max_code)) : 0;
  return step_bits;
}

// With d and dmin fixed, tries the codes next to a sub-block's (rounding each code separately is not always
// best) and keeps the pair, and levels, of least weighted error.
void refine_sub_block(const float* x, const float* w, int nmax, float d, float dmin, uint8_t& scale_code,
                      uint8_t& min_code, uint8_t* levels) {
  uint8_t trial[kMaxGroup];
  float best_error = std::numeric_limits<float>::infinity();
  const int scale_center = scale_code, min_center = min_code;
  for (int sc = std::max(scale_center - 1, 0); sc <= std::min(scale_center + 1, kMaxCode); ++sc) {
    for (int mc = std::max(min_center - 1, 0); mc <= std::min(min_center + 1, kMaxCode); ++mc) {
      const float scale = d * static_cast<float>(sc);
      const float min = dmin * static_cast<float>(mc);
      const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
      for (int i = 0; i < kScaleMinSubBlockSize; ++i)
        trial[i] = static_cast<uint8_t>(round_clamp((x[i] + min) * inverse, 0, nmax));
      const float error = weighted_error(x, w, kScaleMinSubBlockSize, scale, min, trial);
      if (error < best_error) {
        best_error = error;
        scale_code = static_cast<uint8_t>(sc);
        min_code = static_cast<uint8_t>(mc);
        std::copy_n(trial, kScaleMinSubBlockSize, levels);
      }
    }
  }
}

}  // namespace

void error_weights(const float* x, const float* importance, int group, float* w) {
  float sum_squares = 0.0f;
  for (int i = 0; i < kSuperBlock; ++i) sum_squares += x[i] * x[i];
  const float sigma2 = sum_squares / kSuperBlock;
  for (int start = 0; start < kSuperBlock; start += group) {
    float importance_sum = 0.0f;
    if (importance != nullptr) {
      for (int i = start; i < start + group; ++i) importance_sum += importance[i];
    }
    const bool use_importance = importance_sum > 0.0f;
    for (int i = start; i < start + group; ++i) {
      const float plain = std::sqrt(sigma2 + x[i] * x[i]);
      w[i] = use_importance ? importance[i] * plain : plain;
    }
  }
}

float fit_scale(const float* x, const float* w, int n, int lo, int hi, int* levels) {
  float peak = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(peak)) peak = x[i];
  }
  std::fill_n(levels, n, 0);
  if (!(std::fabs(peak) > 1e-15f)) return 0.0f;

  const int reach = -lo > hi ? lo : hi;  // the level of largest magnitude
  int trial[kMaxGroup];
  // For the best scale sum(w*l*x)/sum(w*l^2) the error is sum(w*x^2) - sum(w*l*x)^2/sum(w*l^2), so the
  // levels with the largest sum(w*l*x)^2/sum(w*l^2) win.
  float best_gain = 0.0f, best_scale = 0.0f;
  for (int step = 0; step <= kSteps; ++step) {
    float inverse = (static_cast<float>(reach) + kFirstStep + kStepSize * static_cast<float>(step)) / peak;
    for (int round = 0; round < kRefinements; ++round) {
      float sum_lx = 0.0f, sum_ll = 0.0f;
      bool moved = false;
      for (int i = 0; i < n; ++i) {
        const int l = round_clamp(inverse * x[i], lo, hi);
        moved |= round == 0 || l != trial[i];
        trial[i] = l;
        sum_lx += w[i] * static_cast<float>(l) * x[i];
        sum_ll += w[i] * static_cast<float>(l * l);
      }
      if (!moved || !(sum_ll > 0.0f)) break;
      const float scale = sum_lx / sum_ll;
      const float gain = sum_lx * sum_lx / sum_ll;
      if (gain > best_gain) {
        best_gain = gain;
        best_scale = scale;
        std::copy_n(trial, n, levels);
      }
      if (scale == 0.0f) break;
      inverse = 1.0f / scale;
    }
  }
  return best_scale;
}

ScaleMin fit_scale_min(const float* x, const float* w, int n, int nmax, uint8_t* levels) {
  float lo = x[0], hi = x[0], sum_w = 0.0f, sum_wx = 0.0f;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_wx += w[i] * x[i];
  }
  lo = std::min(lo, 0.0f);  // the min is subtracted: it can only lower values
  std::fill_n(levels, n, 0);
  if (!(hi > lo)) return {0.0f, -lo};

  // Start from the plain min/max mapping, so the search can only improve on it.
  ScaleMin best{(hi - lo) / static_cast<float>(nmax), -lo};
  for (int i = 0; i < n; ++i) levels[i] = static_cast<uint8_t>(round_clamp((x[i] - lo) / best.scale, 0, nmax));
  float best_error = weighted_error(x, w, n, best.scale, best.min, levels);

  uint8_t trial[kMaxGroup];
  for (int step = 0; step <= kSteps; ++step) {
    float inverse = (static_cast<float>(nmax) + kFirstStep + kStepSize * static_cast<float>(step)) / (hi - lo);
    float offset = lo;  // x ~ scale * level + offset, offset <= 0
    for (int round = 0; round < kRefinements; ++round) {
      float sum_l = 0.0f, sum_ll = 0.0f, sum_lx = 0.0f;
      bool moved = false;
      for (int i = 0; i < n; ++i) {
        const int l = round_clamp((x[i] - offset) * inverse, 0, nmax);
        moved |= round == 0 || l != trial[i];
        trial[i] = static_cast<uint8_t>(l);
        const float fl = static_cast<float>(l);
        sum_l += w[i] * fl;
        sum_ll += w[i] * fl * fl;
        sum_lx += w[i] * fl * x[i];
      }
      if (!moved) break;
      // Weighted least squares for scale and offset; when it wants a positive offset, fix it at 0.
      const float det = sum_w * sum_ll - sum_l * sum_l;
      if (!(det > 0.0f)) break;
      float scale = (sum_w * sum_lx - sum_wx * sum_l) / det;
      offset = (sum_ll * sum_wx - sum_l * sum_lx) / det;
      if (offset > 0.0f) {
        offset = 0.0f;
        scale = sum_lx / sum_ll;
      }
      if (!(scale > 0.0f)) break;
      const float error = weighted_error(x, w, n, scale, -offset, trial);
      if (error < best_error) {
        best_error = error;
        best = {scale, -offset};
        std::copy_n(trial, n, levels);
      }
      inverse = 1.0f / scale;
    }
  }
  return best;
}

void pack_scale_min_codes(const ScaleMinCodes& codes, uint8_t* packed) {
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>((codes.scale[j] & 63) | ((codes.scale[j + 4] >> 4) << 6));
    packed[j + 4] = static_cast<uint8_t>((codes.min[j] & 63) | ((codes.min[j + 4] >> 4) << 6));
    packed[j + 8] = static_cast<uint8_t>((codes.scale[j + 4] & 15) | ((codes.min[j + 4] & 15) << 4));
  }
}

ScaleMinCodes unpack_scale_min_codes(const uint8_t* packed) {
  ScaleMinCodes codes;
  for (int j = 0; j < 4; ++j) {
    codes.scale[j] = packed[j] & 63;
    codes.min[j] = packed[j + 4] & 63;
    codes.scale[j + 4] = static_cast<uint8_t>((packed[j + 8] & 15) | ((packed[j] >> 6) << 4));
    codes.min[j + 4] = static_cast<uint8_t>((packed[j + 8] >> 4) | ((packed[j + 4] >> 6) << 4));
  }
  return codes;
}

void quantize_scale_min_block(const float* x, const float* importance, int nmax, ScaleMinBlock& out) {
  float w[kSuperBlock];
  error_weights(x, importance, kScaleMinSubBlockSize, w);
  float scales[kScaleMinSubBlocks], mins[kScaleMinSubBlocks], sub_weights[kScaleMinSubBlocks];
  for (int j = 0; j < kScaleMinSubBlocks; ++j) {
    const int start = j * kScaleMinSubBlockSize;
    const ScaleMin fit = fit_scale_min(x + start, w + start, kScaleMinSubBlockSize, nmax, out.levels + start);
    scales[j] = fit.scale;
    mins[j] = fit.min;
    sub_weights[j] = 0.0f;
    for (int i = start; i < start + kScaleMinSubBlockSize; ++i) sub_weights[j] += w[i];
  }
  // A sub-block's scale and min matter in proportion to the weight of its values.
  out.d_bits = quantize_codes(scales, sub_weights, kScaleMinSubBlocks, kMaxCode, out.codes.scale);
  out.dmin_bits = quantize_codes(mins, sub_weights, kScaleMinSubBlocks, kMaxCode, out.codes.min);
  const float d = sdk::fp16_to_fp32(out.d_bits);
  const float dmin = sdk::fp16_to_fp32(out.dmin_bits);
  for (int j = 0; j < kScaleMinSubBlocks; ++j) {
    const int start = j * kScaleMinSubBlockSize;
    refine_sub_block(x + start, w + start, nmax, d, dmin, out.codes.scale[j], out.codes.min[j], out.levels + start);
  }
}

void encode_scale_min_block(const ScaleMinBlock& block, uint8_t* header, uint8_t* qs, uint8_t* qh) {
  store_u16(header, block.d_bits);
  store_u16(header + 2, block.dmin_bits);
  pack_scale_min_codes(block.codes, header + 4);
  if (qh != nullptr) std::memset(qh, 0, 32);
  for (int chunk = 0; chunk < 4; ++chunk) {
    const uint8_t* low = block.levels + 64 * chunk;
    const uint8_t* high = low + 32;
    for (int l = 0; l < 32; ++l) {
      qs[32 * chunk + l] = static_cast<uint8_t>((low[l] & 15) | ((high[l] & 15) << 4));
      if (qh != nullptr)
        qh[l] |= static_cast<uint8_t>(((low[l] >> 4) << (2 * chunk)) | ((high[l] >> 4) << (2 * chunk + 1)));
    }
  }
}

void decode_scale_min_block(const uint8_t* header, const uint8_t* qs, const uint8_t* qh, float* out) {
  const float d = sdk::fp16_to_fp32(load_u16(header));
  const float dmin = sdk::fp16_to_fp32(load_u16(header + 2));
  const ScaleMinCodes codes = unpack_scale_min_codes(header + 4);
  for (int chunk = 0; chunk < 4; ++chunk) {
    const float scale_low = d * static_cast<float>(codes.scale[2 * chunk]);
    const float min_low = dmin * static_cast<float>(codes.min[2 * chunk]);
    const float scale_high = d * static_cast<float>(codes.scale[2 * chunk + 1]);
    const float min_high = dmin * static_cast<float>(codes.min[2 * chunk + 1]);
    float* low = out + 64 * chunk;
    float* high = low + 32;
    for (int l = 0; l < 32; ++l) {
      const uint8_t packed = qs[32 * chunk + l];
      const int fifth_low = qh != nullptr ? ((qh[l] >> (2 * chunk)) & 1) << 4 : 0;
      const int fifth_high = qh != nullptr ? ((qh[l] >> (2 * chunk + 1)) & 1) << 4 : 0;
      low[l] = scale_low * static_cast<float>((packed & 15) | fifth_low) - min_low;
      high[l] = scale_high * static_cast<float>((packed >> 4) | fifth_high) - min_high;
    }
  }
}

}  // namespace strata::quant_k
