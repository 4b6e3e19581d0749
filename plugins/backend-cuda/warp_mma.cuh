// Warp-level tensor-core instructions used directly rather than through WMMA, whose fragment layout is
// unspecified: with mma.sync the PTX ISA documents which (row, column) elements each lane holds, so a
// kernel can rescale accumulator rows and turn one product's accumulators into the next one's operand
// without leaving registers (the prompt attention kernel's O and P).
//
// Layouts of mma m16n8k16 with f16 operands and float accumulators (PTX ISA, "Matrix Fragments for
// mma.m16n8k16 with floating point type"), lane = 4 g + t:
//   A (16 x 16): a[0] = row g, columns 2t, 2t + 1; a[1] = row g + 8, the same columns; a[2], a[3] as
//                a[0], a[1] at columns + 8.
//   B (16 x 8):  b[0] = rows 2t, 2t + 1 of column g; b[1] = rows 2t + 8, 2t + 9.
//   C, D (16 x 8): c[0], c[1] = row g, columns 2t, 2t + 1; c[2], c[3] = row g + 8, the same columns.
// Each register holds the lower column (A) or row (B) in its low 16 bits.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

namespace strata::cuda {

using FragmentA = uint32_t[4];
using Accumulator = float[4];

// Four 8 x 8 f16 matrices from shared memory, lanes 8m .. 8m + 7 giving the 16-byte rows of matrix m
// (16-byte aligned): register m of lane 4 g + t holds row g, columns 2t and 2t + 1 of matrix m, or with
// kTransposed its column g, rows 2t and 2t + 1. The memory clobber keeps the load after the barrier that
// publishes the tile.
template <bool kTransposed>
__device__ inline void load_matrices(const __half* row, uint32_t (&matrices)[4]) {
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (kTransposed) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(matrices[0]), "=r"(matrices[1]), "=r"(matrices[2]), "=r"(matrices[3])
                 : "r"(address)
                 : "memory");
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(matrices[0]), "=r"(matrices[1]), "=r"(matrices[2]), "=r"(matrices[3])
                 : "r"(address)
                 : "memory");
  }
}

// d += a b on the tensor cores, 16 x 8 x 16. sm_75 lacks the k16 shape: there the same product is two
// m16n8k8 steps, columns 0..7 of a (a[0], a[1]) against rows 0..7 of b (b[0]), then the upper halves.
__device__ inline void multiply_accumulate(Accumulator& d, const FragmentA& a, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(b0));
  asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[2]), "r"(a[3]), "r"(b1));
#endif
}

// Two f16 values as one operand register, low the lower column or row.
__device__ inline uint32_t pack_halves(__half low, __half high) {
  const __half2 pair = __halves2half2(low, high);
  uint32_t bits;
  memcpy(&bits, &pair, sizeof(bits));
  return bits;
}

}  // namespace strata::cuda
