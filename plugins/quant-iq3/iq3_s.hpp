// IQ3_S (GGUF type 21): 3.4375 bits per value.
//
// Block of 256 values, 110 bytes: f16 d; qs[64], the low 8 bits of each 9-bit grid index (one per 4 values,
// into the 512-point grid); qh[8], bit k of qh[ib] the 9th bit of index k of sub-block ib; signs[32], one bit
// per value; scales[4], the nibble l of sub-block ib in scales[ib / 2] (low nibble for even ib).
// A value decodes to d * (1 + 2l) * grid_byte * sign.
#pragma once

#include <cstdint>

#include "iq3_cpu_dot.hpp"
#include "iq3_s_nibbles.hpp"
#ifdef STRATA_WITH_CUDA
#include "cuda/iq3_cuda.hpp"
#endif

namespace strata::iq3 {

struct Iq3SCodec {
  static constexpr uint32_t type_id = 21, block_elements = 256, block_bytes = 110;
  static constexpr const char* name = "IQ3_S";
  static constexpr int qs_offset = 2, qh_offset = 66, signs_offset = 74, scales_offset = 106;  // byte offsets
  static void dequantize(const uint8_t* blocks, float* out, int64_t n_blocks);
  // A block's 256 grid bytes with their signs (odd, -15..15), and sub-block ib's scale nibble l.
  static void signed_levels(const uint8_t* block, int8_t* levels);
  // Group g's (4 values, 0..63) 9-bit grid index, and its 4 sign bits (bit j set: value j negative); inline, for
  // the repacking of whole models (iq3_s_nibbles.cpp).
  static int grid_index(const uint8_t* block, int group) {
    return block[qs_offset + group] | (((block[qh_offset + group / 8] >> (group % 8)) & 1) << 8);
  }
  static int group_signs(const uint8_t* block, int group) {
    return (block[signs_offset + group / 2] >> (4 * (group % 2))) & 0xf;
  }
  static int scale_nibble(const uint8_t* block, int sub_block) {
    return (block[scales_offset + sub_block / 2] >> (4 * (sub_block % 2))) & 0xf;
  }
  static void quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float* importance);
  static constexpr uint32_t cpu_activation_type = kQ8KTypeId;
  static constexpr auto& cpu_dot_rows = sdk::dispatched_dot_rows<kIq3SDot>;
  static constexpr auto& cpu_dot_rows_multi = sdk::dispatched_dot_rows_multi<kIq3SDot>;
  static constexpr auto& cpu_rows_to_int8 = sdk::dispatched_rows_to_int8<kIq3SToInt8>;
  // Its values may be kept as 4-bit levels on the CPU too (iq3_s_nibbles.hpp), whose kernels decode faster.
  using CpuRepacked = Iq3SNibblesCodec;
  static constexpr auto& cpu_repack = repack_iq3_s;
#ifdef STRATA_WITH_CUDA
  STRATA_CODEC_CUDA_LAUNCHERS(cuda, iq3_s);
  // On the GPU its values may be kept as 4-bit levels (iq3_s_nibbles.hpp).
  using CudaRepacked = Iq3SNibblesCodec;
  static constexpr auto& cuda_repack = repack_iq3_s;
#endif
};

}  // namespace strata::iq3
