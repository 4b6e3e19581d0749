// IQ3_S as 4-bit levels: the layout backend-cuda may keep IQ3_S weights in on the GPU (ABI 1.6, quant.h's
// cuda_repacked) and backend-cpu in host memory (ABI 1.9, cpu_repacked), 4.25 bits per value, not a GGUF type.
//
// Every IQ3_S value is d * (1 + 2l) * m with m odd in -15..15 (the grid's bytes are 1, 3, ..., 15, a sign bit
// apart), so m = 2k + 1 for a 4-bit two's-complement k. Block of 256 values, 136 bytes: f16 d; 2 zero bytes;
// a little-endian uint32 with sub-block ib's scale nibble l in bits 4ib..4ib+3 (IQ3_S's scales bytes); then per
// 32-value sub-block 16 bytes, byte j holding value j's k in its low nibble and value j + 16's in its high one.
// A group of 32 values is then 16 contiguous bytes that a GPU decodes with a few integer operations a word,
// against IQ3_S's nine narrow loads and eight grid lookups (the +23.6% bytes buy that).
#pragma once

#include <cstdint>
#include <cstring>

#include "iq3_cpu_dot.hpp"

#ifdef STRATA_WITH_CUDA
#include "cuda/iq3_cuda.hpp"
#endif

namespace strata::iq3 {

struct Iq3SNibblesCodec {
  static constexpr uint32_t type_id = 21u | 0x80000000u, block_elements = 256, block_bytes = 136;
  static constexpr const char* name = "IQ3_S (4-bit levels)";
  static constexpr int scales_offset = 4, levels_offset = 8, level_bytes_per_sub_block = 16;  // byte offsets, sizes
  // Sub-block ib's scale nibble l, and its value i's level 2k + 1 (k: the value's nibble as two's complement).
  static int scale_nibble(const uint8_t* block, int sub_block) {
    uint32_t scales;
    std::memcpy(&scales, block + scales_offset, sizeof scales);
    return static_cast<int>((scales >> (4 * sub_block)) & 0xf);
  }
  static int level(const uint8_t* block, int sub_block, int i) {
    const int nibble = (block[levels_offset + level_bytes_per_sub_block * sub_block + i % 16] >> (4 * (i / 16))) & 0xf;
    return 2 * ((nibble ^ 8) - 8) + 1;
  }
  static void dequantize(const uint8_t* blocks, float* out, int64_t n_blocks);
  // IQ3_S's quantizer, then repack_iq3_s.
  static void quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float* importance);
  static constexpr uint32_t cpu_activation_type = kQ8KTypeId;
  static constexpr auto& cpu_dot_rows = sdk::dispatched_dot_rows<kIq3SNibblesDot>;
  static constexpr auto& cpu_dot_rows_multi = sdk::dispatched_dot_rows_multi<kIq3SNibblesDot>;
  static constexpr auto& cpu_rows_to_int8 = sdk::dispatched_rows_to_int8<kIq3SNibblesToInt8>;
#ifdef STRATA_WITH_CUDA
  STRATA_CODEC_CUDA_LAUNCHERS(cuda, iq3_s_nibbles);
#endif
};

// n_blocks IQ3_S blocks (110 bytes each) as Iq3SNibblesCodec blocks: the same values, exactly.
void repack_iq3_s(const uint8_t* blocks, uint8_t* out, int64_t n_blocks);

}  // namespace strata::iq3
