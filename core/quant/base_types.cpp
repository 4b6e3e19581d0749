// The base tensor types every model uses, built into the core through the same SDK table that quant
// plugins fill: F32, F16, BF16 and Q8_0, and Q8_K for activations.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/gguf/ggml_types.hpp"
#include "core/quant/base_cpu_kernels.hpp"
#include "core/quant/quant_registry.hpp"
#include "strata/half.hpp"
#include "strata/plugin.hpp"

namespace strata {
namespace {

using sdk::bf16_to_fp32;
using sdk::fp16_to_fp32;
using sdk::fp32_to_bf16;
using sdk::fp32_to_fp16;

// The 8-bit codecs below quantize activations for the CPU's dot kernels: a block holding NaN or infinity gets a
// NaN scale, so that the dot products reading it are NaN, as a float product would be, instead of the value
// rounding away to a level of 0 and the fault going unseen.
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct F32Codec {
  static constexpr uint32_t type_id = gguf::type_id::F32, block_elements = 1, block_bytes = 4;
  static constexpr const char* name = "F32";
  static constexpr uint32_t cpu_activation_type = gguf::type_id::F32;
  static constexpr auto& cpu_dot_rows = sdk::dispatched_dot_rows<cpu_kernels::kF32Dot>;
  static void dequantize(const uint8_t* blocks, float* out, int64_t n) { std::memcpy(out, blocks, n * 4); }
  static void quantize_row(const float* src, uint8_t* blocks, int64_t n, const float*) {
    std::memcpy(blocks, src, n * 4);
  }
};

// 16-bit formats: one value per "block", converted with a pair of scalar functions.
template <uint32_t Id, const char* Name, float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float),
          const sdk::CpuDotVariants& CpuDot>
struct Half16Codec {
  static constexpr uint32_t type_id = Id, block_elements = 1, block_bytes = 2;
  static constexpr const char* name = Name;
  static constexpr uint32_t cpu_activation_type = gguf::type_id::F32;
  static constexpr auto& cpu_dot_rows = sdk::dispatched_dot_rows<CpuDot>;
  static void dequantize(const uint8_t* blocks, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t bits;
      std::memcpy(&bits, blocks + 2 * i, 2);
      out[i] = ToFloat(bits);
    }
  }
  static void quantize_row(const float* src, uint8_t* blocks, int64_t n, const float*) {
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t bits = FromFloat(src[i]);
      std::memcpy(blocks + 2 * i, &bits, 2);
    }
  }
};
constexpr char kF16[] = "F16";
constexpr char kBF16[] = "BF16";
using F16Codec = Half16Codec<gguf::type_id::F16, kF16, fp16_to_fp32, fp32_to_fp16, cpu_kernels::kF16Dot>;
using BF16Codec = Half16Codec<gguf::type_id::BF16, kBF16, bf16_to_fp32, fp32_to_bf16, cpu_kernels::kBF16Dot>;

// Q8_0: 32 values as int8 with one f16 scale (d = max|x| / 127).
struct Q8_0Codec {
  static constexpr uint32_t type_id = gguf::type_id::Q8_0, block_elements = 32, block_bytes = 34;
  static constexpr const char* name = "Q8_0";
  static constexpr uint32_t cpu_activation_type = gguf::type_id::Q8_0;
  static constexpr auto& cpu_dot_rows = sdk::dispatched_dot_rows<cpu_kernels::kQ8_0Dot>;
  static void dequantize(const uint8_t* blocks, float* out, int64_t n_blocks) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* block = blocks + b * block_bytes;
      uint16_t d_bits;
      std::memcpy(&d_bits, block, 2);
      const float d = fp16_to_fp32(d_bits);
      const auto* q = reinterpret_cast<const int8_t*>(block + 2);
      for (int i = 0; i < 32; ++i) out[b * 32 + i] = d * static_cast<float>(q[i]);
    }
  }
  static void quantize_row(const float* src, uint8_t* blocks, int64_t n, const float*) {
    for (int64_t b = 0; b < n / 32; ++b) {
      const float* x = src + b * 32;
      uint8_t* block = blocks + b * block_bytes;
      float amax = 0.0f, non_finite = 0.0f;  // x * 0 is 0 for a finite x, NaN otherwise: the check rides this pass
      for (int i = 0; i < 32; ++i) {
        amax = std::fmax(amax, std::fabs(x[i]));
        non_finite += x[i] * 0.0f;
      }
      const bool finite = non_finite == 0.0f;
      const float d = finite ? amax / 127.0f : kNaN;
      const float inverse = finite && d != 0.0f ? 1.0f / d : 0.0f;
      const uint16_t d_bits = fp32_to_fp16(d);
      std::memcpy(block, &d_bits, 2);
      auto* q = reinterpret_cast<int8_t*>(block + 2);
      for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(std::lround(x[i] * inverse));
    }
  }
};

// Q8_K: 256 values as int8 with a float scale and the sums of each 16 values. Not a weight format in
// practice: the CPU converts activations to it before dot products with k-quant and IQ weights.
struct Q8_KCodec {
  static constexpr uint32_t type_id = gguf::type_id::Q8_K, block_elements = 256, block_bytes = 292;
  static constexpr const char* name = "Q8_K";
  static void dequantize(const uint8_t* blocks, float* out, int64_t n_blocks) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* block = blocks + b * block_bytes;
      float d;
      std::memcpy(&d, block, 4);
      const auto* q = reinterpret_cast<const int8_t*>(block + 4);
      for (int i = 0; i < 256; ++i) out[b * 256 + i] = d * static_cast<float>(q[i]);
    }
  }
  static_assert(block_bytes == sdk::Q8K::kBytes);
  static void quantize_row(const float* src, uint8_t* blocks, int64_t n, const float*) {
    cpu_kernels::quantize_q8_k(src, blocks, n);
  }
};

}  // namespace

const strata_quant_table& base_quant_table() {
  return sdk::QuantTable<F32Codec, F16Codec, BF16Codec, Q8_0Codec, Q8_KCodec>::table;
}

}  // namespace strata
