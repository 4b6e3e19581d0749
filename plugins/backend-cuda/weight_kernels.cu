// Decoders of the core's base types for the SDK's block kernels, and the lookup of a type's kernels.
#include <cstddef>

#include "strata/cuda/block_kernels.cuh"
#include "weight_kernels.hpp"

namespace strata::cuda {
namespace {

using sdk::cuda::load_f16;

constexpr uint32_t kTypeQ8_0 = 8;

// Float types as blocks of 8 values; rows of these types must hold a multiple of 8 values.
struct F32Decoder {
  static constexpr int block_elements = 8, block_bytes = 32;
  __device__ static void decode8(const uint8_t* block, int, float* values) {
    const float4* v = reinterpret_cast<const float4*>(block);
    const float4 a = v[0], b = v[1];
    values[0] = a.x, values[1] = a.y, values[2] = a.z, values[3] = a.w;
    values[4] = b.x, values[5] = b.y, values[6] = b.z, values[7] = b.w;
  }
};

struct F16Decoder {
  static constexpr int block_elements = 8, block_bytes = 16;
  __device__ static void decode8(const uint8_t* block, int, float* values) {
    const uint4 bits = *reinterpret_cast<const uint4*>(block);
    const __half2* halves = reinterpret_cast<const __half2*>(&bits);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 pair = __half22float2(halves[i]);
      values[2 * i] = pair.x, values[2 * i + 1] = pair.y;
    }
  }
};

struct BF16Decoder {
  static constexpr int block_elements = 8, block_bytes = 16;
  __device__ static void decode8(const uint8_t* block, int, float* values) {
    const uint4 bits = *reinterpret_cast<const uint4*>(block);
    const uint32_t words[4] = {bits.x, bits.y, bits.z, bits.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      values[2 * i] = __uint_as_float(words[i] << 16);
      values[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
  }
};

// 32 int8 levels after an f16 scale, 34 bytes: value = d * level.
struct Q8_0Decoder {
  static constexpr int block_elements = 32, block_bytes = 34;
  __device__ static void decode8(const uint8_t* block, int chunk, float* values) {
    const float d = load_f16(block);
    const auto* levels = reinterpret_cast<const int8_t*>(block + 2 + 8 * chunk);
#pragma unroll
    for (int i = 0; i < 8; ++i) values[i] = __fmul_rn(d, static_cast<float>(levels[i]));
  }
  static constexpr bool q8_has_min = false;
  __device__ static sdk::cuda::F16Scale f16_scale(const uint8_t* block, int) {
    return {sdk::cuda::load_half(block), __int2half_rn(1)};
  }
  __device__ static void unpack32(const uint8_t* block, int, int32_t* levels, float* d, float&) {
    d[0] = d[1] = load_f16(block);
#pragma unroll
    for (int word = 0; word < 8; ++word)
      levels[word] = static_cast<int32_t>(sdk::cuda::load_u32_aligned2(block + 2 + 4 * word));
  }
};

// The core's float types have blocks of one value, the decoders above blocks of 8: counts are converted.
template <auto Launch>
strata_status per_value_dequantize_f16(const void* blocks, uint16_t* out, int64_t n_values, void* stream,
                                       strata_error* error) {
  return Launch(blocks, out, n_values / 8, stream, error);
}

STRATA_DEFINE_CUDA_LAUNCHERS(f32, F32Decoder)
STRATA_DEFINE_CUDA_LAUNCHERS(f16, F16Decoder)
STRATA_DEFINE_CUDA_LAUNCHERS(bf16, BF16Decoder)
STRATA_DEFINE_CUDA_LAUNCHERS(q8_0, Q8_0Decoder)

}  // namespace

WeightKernels weight_kernels(const strata_quant_type& type) {
  switch (type.type_id) {
    case kTypeF32:
      return {&per_value_dequantize_f16<f32_dequantize_f16>, &f32_matvec, &f32_expert_matvec, &f32_grouped_gemm};
    case kTypeF16:
      return {&per_value_dequantize_f16<f16_dequantize_f16>, &f16_matvec, &f16_expert_matvec, &f16_grouped_gemm};
    case kTypeBF16:
      return {&per_value_dequantize_f16<bf16_dequantize_f16>, &bf16_matvec, &bf16_expert_matvec, &bf16_grouped_gemm};
    case kTypeQ8_0:
      return {&q8_0_dequantize_f16, &q8_0_matvec,    &q8_0_expert_matvec,
              &q8_0_grouped_gemm,   &q8_0_matvec_q8, &q8_0_matvec_normed};
  }
  // A plugin older than a field does not have it.
  if (!STRATA_HAS_FIELD(&type, cuda_matvec)) return {};
  WeightKernels kernels{type.cuda_dequantize_f16, type.cuda_matvec};
  if (STRATA_HAS_FIELD(&type, cuda_expert_matvec)) kernels.expert_matvec = type.cuda_expert_matvec;
  if (STRATA_HAS_FIELD(&type, cuda_grouped_gemm)) kernels.grouped_gemm = type.cuda_grouped_gemm;
  if (STRATA_HAS_FIELD(&type, cuda_matvec_q8)) kernels.matvec_q8 = type.cuda_matvec_q8;
  if (STRATA_HAS_FIELD(&type, cuda_matvec_normed)) kernels.matvec_normed = type.cuda_matvec_normed;
  return kernels;
}

}  // namespace strata::cuda
