// Declares the CUDA launchers of one quant type, NAME_dequantize_f16, NAME_matvec, NAME_expert_matvec,
// NAME_grouped_gemm, NAME_matvec_q8 and NAME_matvec_normed, with the signatures of strata_quant_type's cuda_*
// fields (quant.h). A plain C++ header, so that a codec header compiled without nvcc can name them;
// strata/cuda/block_kernels.cuh defines them from a block decoder (STRATA_DEFINE_CUDA_LAUNCHERS) in a .cu file.
#pragma once

#include <cstddef>
#include <cstdint>

#include "strata/quant.h"

// Inside a codec struct (strata/plugin.hpp): its CUDA launchers NS::NAME_*, as make_quant_type takes them.
#define STRATA_CODEC_CUDA_LAUNCHERS(NS, NAME)                             \
  static constexpr auto& cuda_dequantize_f16 = NS::NAME##_dequantize_f16; \
  static constexpr auto& cuda_matvec = NS::NAME##_matvec;                 \
  static constexpr auto& cuda_expert_matvec = NS::NAME##_expert_matvec;   \
  static constexpr auto& cuda_grouped_gemm = NS::NAME##_grouped_gemm;     \
  static constexpr auto& cuda_matvec_q8 = NS::NAME##_matvec_q8;           \
  static constexpr auto& cuda_matvec_normed = NS::NAME##_matvec_normed

#define STRATA_DECLARE_CUDA_LAUNCHERS(NAME)                                                                        \
  strata_status NAME##_dequantize_f16(const void* blocks, uint16_t* out, int64_t n_blocks, void* stream,           \
                                      strata_error* error);                                                        \
  strata_status NAME##_matvec(const void* weight, int64_t n, int64_t n_rows, size_t row_bytes, const float* x,     \
                              int64_t n_tokens, float* out, void* stream, strata_error* error);                    \
  strata_status NAME##_expert_matvec(const strata_cuda_expert_matvec* args, void* stream, strata_error* error);    \
  strata_status NAME##_grouped_gemm(const strata_cuda_grouped_gemm* args, void* stream, strata_error* error);      \
  strata_status NAME##_matvec_q8(const void* weight, int64_t n, int64_t n_rows, size_t row_bytes,                  \
                                 const int8_t* levels, const float* scales, int64_t n_tokens, float* out,          \
                                 void* stream, strata_error* error);                                               \
  strata_status NAME##_matvec_normed(const void* weight, int64_t n, int64_t n_rows, size_t row_bytes,              \
                                     const strata_cuda_normed_rows* x, int64_t n_tokens, float* out, void* stream, \
                                     strata_error* error)
