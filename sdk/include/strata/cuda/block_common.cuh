// The pieces every CUDA block kernel shares (include from .cu files, through strata/cuda/block_kernels.cuh):
// constants, unaligned little-endian loads, warp reductions, and a Decoder's chunk of 8 values. A block
// format is described by a Decoder (see block_kernels.cuh).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "strata/cuda/launch.cuh"
#include "strata/quant.h"

namespace strata::sdk::cuda {

inline constexpr int kChunkValues = 8;
inline constexpr int kMaxMatvecTokens = 8;
inline constexpr int kMatvecRowsPerBlock = 4;  // one warp per row
inline constexpr int kWarp = 32;

// Blocks are packed back to back (34, 98, 110 bytes...), so multi-byte fields are read a byte at a time.
__device__ inline uint32_t load_u16(const uint8_t* p) { return p[0] | (uint32_t{p[1]} << 8); }
__device__ inline uint32_t load_u32(const uint8_t* p) { return load_u16(p) | (load_u16(p + 2) << 16); }
__device__ inline __half load_half(const uint8_t* p) {
  return __ushort_as_half(static_cast<unsigned short>(load_u16(p)));
}
__device__ inline float load_f16(const uint8_t* p) { return __half2float(load_half(p)); }

// Where fields are known to be 2-byte aligned (every block size here is even, rows start on block
// boundaries): half the loads of load_u32.
__device__ inline uint32_t load_u32_aligned2(const uint8_t* p) {
  const auto* halves = reinterpret_cast<const uint16_t*>(p);
  return halves[0] | (uint32_t{halves[1]} << 16);
}
__device__ inline float load_f16_aligned2(const uint8_t* p) {
  return __half2float(*reinterpret_cast<const __half*>(p));
}

// kWords consecutive words from a 2-byte aligned address: kWords + 1 aligned 4-byte loads, each word
// funnel-shifted out of two (where the address is 4-byte aligned the last load repeats one). What is read
// is the aligned 4-byte words that cover the range: a range that starts on an odd half-word also reads the
// 2 bytes either side of it, which must be readable (Q6_K's fields, at any alignment of its 210-byte blocks,
// have them inside the allocation; Q4_K's and Q5_K's blocks, 144 and 176 bytes, are 4-byte aligned wherever
// their weights are). Two 16-bit loads per word made the decode matvec of a Q6_K output head bound by its L1
// requests.
template <int kWords>
__device__ inline void load_words_aligned2(const uint8_t* p, uint32_t (&words)[kWords]) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  const auto* aligned = reinterpret_cast<const uint32_t*>(address & ~uintptr_t{3});
  const auto shift = static_cast<unsigned>(address & 2) * 8;  // 0 or 16
  uint32_t raw[kWords + 1];
#pragma unroll
  for (int i = 0; i < kWords; ++i) raw[i] = aligned[i];
  raw[kWords] = aligned[shift != 0 ? kWords : kWords - 1];
#pragma unroll
  for (int i = 0; i < kWords; ++i) words[i] = __funnelshift_r(raw[i], raw[i + 1], shift);
}

// Four nonzero byte magnitudes as signed bytes, byte i negated where bit i of bits is set (bits above 3 are
// ignored). The multiply moves bit i to bit 0 of byte i (the four shifted copies of 4 bits cannot carry into
// each other); a negated byte is its complement plus one, which cannot carry out of a nonzero byte. Five
// instructions where moving the bits one by one and __vsub4 took twice as many, in the innermost loop of
// the IQ3 decode kernels.
__device__ inline int32_t signed_bytes(uint32_t magnitudes, uint32_t bits) {
  const uint32_t ones = ((bits & 15u) * 0x00204081u) & 0x01010101u;
  return static_cast<int32_t>((magnitudes ^ (ones * 0xffu)) + ones);
}

// 16 bytes from global to shared memory, of which the first `bytes` are read and the rest zero (both
// addresses 16-byte aligned): cp.async, which the SM carries out while the threads go on, from sm_80; a
// plain copy before, and for a piece cut short (the end of an allocation whose size is not a multiple of 16:
// compute-sanitizer's memcheck takes a cp.async for a read of all 16 bytes, whatever its source size).
__device__ inline void copy16_async(void* shared_destination, const void* global_source, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (bytes == 0 || bytes == 16) {
    const auto destination = static_cast<unsigned>(__cvta_generic_to_shared(shared_destination));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(destination), "l"(global_source), "r"(bytes)
                 : "memory");
    return;
  }
#else
  if (bytes == 16) {
    *static_cast<uint4*>(shared_destination) = *static_cast<const uint4*>(global_source);
    return;
  }
#endif
  __align__(16) uint8_t chunk[16] = {};
  for (int i = 0; i < bytes; ++i) chunk[i] = static_cast<const uint8_t*>(global_source)[i];
  *static_cast<uint4*>(shared_destination) = *reinterpret_cast<const uint4*>(chunk);
}
__device__ inline void commit_async_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
// Waits until at most kPending committed groups of this thread's copies are still in flight.
template <int kPending>
__device__ inline void wait_async_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
#endif
}

// An L2 cache policy (sm_80 and later) for weights: their lines are evicted first. A decode step reads ~30
// times the L2's size of weights once each, which would otherwise push out what the next layer reads again
// (kernel code, the KV cache, activations).
__device__ inline uint64_t weights_cache_policy() {
  uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#endif
  return policy;
}

// Asynchronous copies of bytes [0, bytes) of weights from global to shared memory (a multiple of 16, both
// addresses 16-byte aligned), the block's threads taking 16 bytes at a time, as one committed group: after
// wait_async_copies<0>() and a barrier every thread sees them. Their lines come into L2 under
// weights_cache_policy().
__device__ inline void copy_to_shared_async(uint8_t* to, const uint8_t* from, size_t bytes) {
  [[maybe_unused]] const uint64_t policy = weights_cache_policy();  // used from sm_80
  for (size_t i = threadIdx.x * size_t{16}; i < bytes; i += blockDim.x * size_t{16}) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const auto destination = static_cast<unsigned>(__cvta_generic_to_shared(to + i));
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(destination), "l"(from + i),
                 "l"(policy)
                 : "memory");
#else
    copy16_async(to + i, from + i, 16);
#endif
  }
  commit_async_copies();
}

__device__ inline float warp_sum(float value) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__device__ inline float warp_max(float value) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// The sum of value over the whole block, for every thread; warp_partials holds a float per warp of the block
// and may be reused after the caller's next barrier.
__device__ inline float block_sum(float value, float* warp_partials) {
  value = warp_sum(value);
  if (threadIdx.x % kWarp == 0) warp_partials[threadIdx.x / kWarp] = value;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x) / kWarp; ++w) total += warp_partials[w];
  return total;
}

// The end of a matvec row: each token's lane partial sums reduced over the warp, lane 0 storing them.
template <int kTokens>
__device__ inline void store_token_sums(const float (&sums)[kTokens], int n_tokens, int64_t n_rows, int64_t row,
                                        int lane, float* out) {
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    if (t < n_tokens) {
      const float sum = warp_sum(sums[t]);
      if (lane == 0) out[t * n_rows + row] = sum;
    }
  }
}

// Chunks a lane decodes before it uses any: their loads are independent and in flight together. A warp
// reads only a block or two per chunk step, so one chunk at a time would leave the memory system idle.
inline constexpr int kChunksInFlight = 4;

// Values 8*chunk .. 8*chunk+7 of a row of blocks.
template <class Decoder>
__device__ inline void decode_chunk(const uint8_t* row, int64_t chunk, float w[kChunkValues]) {
  constexpr int kChunksPerBlock = Decoder::block_elements / kChunkValues;
  Decoder::decode8(row + chunk / kChunksPerBlock * Decoder::block_bytes, static_cast<int>(chunk % kChunksPerBlock), w);
}

// dot(w, the 8 values of x at chunk).
__device__ inline float dot8(const float w[kChunkValues], const float* x, int64_t chunk) {
  const float4* xs = reinterpret_cast<const float4*>(x + chunk * kChunkValues);
  const float4 a = xs[0], b = xs[1];
  return w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * b.x + w[5] * b.y + w[6] * b.z + w[7] * b.w;
}

}  // namespace strata::sdk::cuda
