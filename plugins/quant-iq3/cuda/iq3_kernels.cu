// IQ3_XXS, IQ3_S and IQ3_S-as-4-bit-levels block decoders for the SDK's CUDA kernels. Each decodes exactly as the CPU
// dequantizer (iq3_xxs.cpp, iq3_s.cpp): the same grid and sign tables, the same float products in the same order.
#include <mutex>

#include "cuda/iq3_cuda.hpp"
#include "iq3_tables.hpp"
#include "strata/cuda/block_kernels.cuh"

namespace strata::iq3::cuda {
namespace {

using sdk::cuda::load_f16;
using sdk::cuda::load_u32;
using sdk::cuda::signed_bytes;

// The device copies of the lookup tables, filled once from the host tables (one source of truth).
__device__ uint32_t device_xxs_grid[256];
__device__ uint32_t device_s_grid[512];
__device__ uint8_t device_signs[128];

// Shared-memory copies for unpack32 (the 8-bit decode kernels call load_shared_tables first): a warp's 32
// random grid lookups conflict less in shared memory banks than in L1 cache lines.
__shared__ uint32_t shared_xxs_grid[256];
__shared__ uint32_t shared_s_grid[512];
__shared__ uint8_t shared_signs[128];

template <class T, int kSize>
__device__ void copy_table(const T (&from)[kSize], T (&to)[kSize]) {
  for (int i = threadIdx.x; i < kSize; i += blockDim.x) to[i] = from[i];
}

strata_status upload_tables(strata_error* error) {
  static std::once_flag once;
  static cudaError_t status = cudaSuccess;
  std::call_once(once, [] {
    status = cudaMemcpyToSymbol(device_xxs_grid, kIq3XxsGrid, sizeof kIq3XxsGrid);
    if (status == cudaSuccess) status = cudaMemcpyToSymbol(device_s_grid, kIq3SGrid, sizeof kIq3SGrid);
    if (status == cudaSuccess) status = cudaMemcpyToSymbol(device_signs, kSignsIq2xs, sizeof kSignsIq2xs);
    // A copy from pageable memory may return before it lands; kernels on other streams must see the tables.
    if (status == cudaSuccess) status = cudaDeviceSynchronize();
  });
  if (status == cudaSuccess) return STRATA_OK;
  return sdk::cuda::fail(error, STRATA_E_INTERNAL, std::string("IQ3 tables to the GPU: ") + cudaGetErrorString(status));
}

// Writes the 4 magnitudes of a grid point times scale, negated where the sign bits (from bit first_bit) say.
__device__ inline void expand_point(uint32_t point, float scale, uint32_t signs, int first_bit, float* out) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float value = __fmul_rn(scale, static_cast<float>((point >> (8 * j)) & 0xffu));
    out[j] = (signs >> (first_bit + j)) & 1u ? -value : value;
  }
}

// 256 values in 98 bytes: d, 64 grid indices, then per 32 values a uint32 of four 7-bit sign indices and
// the scale nibble. A chunk of 8 values is one sign group: two grid points under one sign byte.
struct Iq3XxsDecoder {
  static constexpr int block_elements = 256, block_bytes = 98;
  static strata_status prepare(strata_error* error) { return upload_tables(error); }
  __device__ static void decode8(const uint8_t* block, int chunk, float* values) {
    const int sub_block = chunk / 4, sign_group = chunk % 4;
    const uint32_t packed = load_u32(block + 66 + 4 * sub_block);
    const float sub_scale = __fmul_rn(__fmul_rn(load_f16(block), 0.5f + static_cast<float>(packed >> 28)), 0.5f);
    const uint32_t signs = device_signs[(packed >> (7 * sign_group)) & 127];
    const uint8_t* indices = block + 2 + 8 * sub_block + 2 * sign_group;
    expand_point(device_xxs_grid[indices[0]], sub_scale, signs, 0, values);
    expand_point(device_xxs_grid[indices[1]], sub_scale, signs, 4, values + 4);
  }
  // A group of 32 values is one sub-block: 8 grid points, signs from four 7-bit indices.
  static constexpr bool q8_has_min = false;
  __device__ static void load_shared_tables() {
    copy_table(device_xxs_grid, shared_xxs_grid);
    copy_table(device_signs, shared_signs);
  }
  // Grid magnitudes are at most 62, multipliers (2s + 1) / 4 at most 31 / 4: products below 2048 / 4.
  __device__ static sdk::cuda::F16Scale f16_scale(const uint8_t* block, int group) {
    const uint32_t packed = load_u32(block + 66 + 4 * group);
    return {sdk::cuda::load_half(block), __float2half_rn(0.25f * static_cast<float>(1 + 2 * (packed >> 28)))};
  }
  __device__ static void unpack32(const uint8_t* block, int group, int32_t* levels, float* d, float&) {
    const uint32_t packed = load_u32(block + 66 + 4 * group);
    d[0] = d[1] = __fmul_rn(__fmul_rn(load_f16(block), 0.5f + static_cast<float>(packed >> 28)), 0.5f);
    const uint8_t* indices = block + 2 + 8 * group;
#pragma unroll
    for (int pair = 0; pair < 4; ++pair) {
      const uint32_t signs = shared_signs[(packed >> (7 * pair)) & 127];
      levels[2 * pair] = signed_bytes(shared_xxs_grid[indices[2 * pair]], signs);
      levels[2 * pair + 1] = signed_bytes(shared_xxs_grid[indices[2 * pair + 1]], signs >> 4);
    }
  }
};

// 256 values in 110 bytes: d, qs[64] (low 8 bits of the 9-bit indices), qh[8], signs[32], scales[4].
// A chunk of 8 values is two grid points of one sub-block under one sign byte.
struct Iq3SDecoder {
  static constexpr int block_elements = 256, block_bytes = 110;
  static strata_status prepare(strata_error* error) { return upload_tables(error); }
  __device__ static void decode8(const uint8_t* block, int chunk, float* values) {
    const int sub_block = chunk / 4, first_group = 2 * (chunk % 4);
    const int nibble = (block[106 + sub_block / 2] >> (4 * (sub_block % 2))) & 0xf;
    const float sub_scale = __fmul_rn(load_f16(block), static_cast<float>(1 + 2 * nibble));
    const uint32_t high_bits = block[66 + sub_block];
    const uint32_t signs = block[74 + 4 * sub_block + chunk % 4];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int group = first_group + half;
      const uint32_t index = block[2 + 8 * sub_block + group] | (((high_bits >> group) & 1u) << 8);
      expand_point(device_s_grid[index], sub_scale, signs, 4 * half, values + 4 * half);
    }
  }
  // A group of 32 values is one sub-block: 8 grid points of 9-bit indices, 4 sign bytes.
  static constexpr bool q8_has_min = false;
  __device__ static void load_shared_tables() { copy_table(device_s_grid, shared_s_grid); }
  // Grid magnitudes are at most 15, sub-block multipliers at most 31: products below 2048.
  __device__ static sdk::cuda::F16Scale f16_scale(const uint8_t* block, int group) {
    const int nibble = (block[106 + group / 2] >> (4 * (group % 2))) & 0xf;
    return {sdk::cuda::load_half(block), __int2half_rn(1 + 2 * nibble)};
  }
  __device__ static void unpack32(const uint8_t* block, int group, int32_t* levels, float* d, float&) {
    const int nibble = (block[106 + group / 2] >> (4 * (group % 2))) & 0xf;
    d[0] = d[1] = __fmul_rn(load_f16(block), static_cast<float>(1 + 2 * nibble));
    const uint32_t high_bits = block[66 + group];
    const uint32_t signs = sdk::cuda::load_u32_aligned2(block + 74 + 4 * group);
    const uint32_t low_bits[2] = {sdk::cuda::load_u32_aligned2(block + 2 + 8 * group),
                                  sdk::cuda::load_u32_aligned2(block + 6 + 8 * group)};
#pragma unroll
    for (int point = 0; point < 8; ++point) {
      // Byte point % 4 of the low bits with bit point of high_bits above it: two instructions.
      const uint32_t index =
          __byte_perm(low_bits[point / 4], 0, 0x4440 + point % 4) | ((high_bits << (8 - point)) & 0x100u);
      levels[point] = signed_bytes(shared_s_grid[index], signs >> (4 * point));
    }
  }
};

// The four 4-bit two's-complement k of a word's bytes (its low nibbles, or its high ones with shift 4) as the
// signed bytes 2k + 1: 2k's low five bits, one, and 0xe0 where k < 0 (bit 4 of 2k's) to extend the sign.
// No byte carries into the next (at most 0x1f + 0xe0).
__device__ inline int32_t odd_levels(uint32_t word, int shift) {
  const uint32_t doubled = ((word >> shift) << 1) & 0x1e1e1e1eu;
  return static_cast<int32_t>((doubled | 0x01010101u) + (doubled & 0x10101010u) * 14u);
}

// IQ3_S as 4-bit levels (iq3_s_nibbles.hpp), 136 bytes: d, 2 zero bytes, the scale nibbles, then 16 bytes
// per 32-value group. A group is one 8-byte header load and two 8-byte level loads, and no table.
struct Iq3SNibblesDecoder {
  static constexpr int block_elements = 256, block_bytes = 136;
  __device__ static float sub_scale(const uint8_t* block, int group) {
    const uint2 header = *reinterpret_cast<const uint2*>(block);
    return __fmul_rn(__half2float(__ushort_as_half(static_cast<unsigned short>(header.x))),
                     static_cast<float>(1 + 2 * ((header.y >> (4 * group)) & 0xf)));
  }
  // The same float products as IQ3_S's decode8: d * (1 + 2l), then times the odd level.
  __device__ static void decode8(const uint8_t* block, int chunk, float* values) {
    const int group = chunk / 4, first = 8 * (chunk % 4);
    const float scale = sub_scale(block, group);
    const uint2 word = *reinterpret_cast<const uint2*>(block + 8 + 16 * group + first % 16);
    const int shift = first < 16 ? 0 : 4;
    const int32_t levels[2] = {odd_levels(word.x, shift), odd_levels(word.y, shift)};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      values[i] = __fmul_rn(scale, static_cast<float>(static_cast<int8_t>(levels[i / 4] >> (8 * (i % 4)))));
    }
  }
  static constexpr bool q8_has_min = false;
  // As IQ3_S: levels of magnitude at most 15, multipliers at most 31.
  __device__ static sdk::cuda::F16Scale f16_scale(const uint8_t* block, int group) {
    const uint2 header = *reinterpret_cast<const uint2*>(block);
    return {__ushort_as_half(static_cast<unsigned short>(header.x)),
            __int2half_rn(1 + 2 * ((header.y >> (4 * group)) & 0xf))};
  }
  __device__ static void unpack32(const uint8_t* block, int group, int32_t* levels, float* d, float&) {
    d[0] = d[1] = sub_scale(block, group);
    const auto* words = reinterpret_cast<const uint2*>(block + 8 + 16 * group);
    const uint2 first = words[0], second = words[1];
    const uint32_t bytes[4] = {first.x, first.y, second.x, second.y};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      levels[i] = odd_levels(bytes[i], 0);      // values 4i .. 4i + 3
      levels[4 + i] = odd_levels(bytes[i], 4);  // values 16 + 4i ..
    }
  }
};

}  // namespace

STRATA_DEFINE_CUDA_LAUNCHERS(iq3_xxs, Iq3XxsDecoder)
STRATA_DEFINE_CUDA_LAUNCHERS(iq3_s, Iq3SDecoder)
STRATA_DEFINE_CUDA_LAUNCHERS(iq3_s_nibbles, Iq3SNibblesDecoder)

}  // namespace strata::iq3::cuda
