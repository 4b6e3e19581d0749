// The fast path for big quantized tensors. The IQ3 and k-quant quantizers search grids and scales at a
// few million values per second per thread, far too slow for the ~30e9 values of a 30B model. Instead, a
// pool of rows is drawn from the tensor's distribution and quantized by the real quantizer; each row of
// the tensor is then assembled block by block, each block copied from a randomly chosen pool row at the
// same position. Every block is thus a valid block the codec itself produced, of the intended scale, for
// any block type, and assembling a row costs one copy. Rows share a given block with chance 1/pool_rows,
// which keeps them practically uncorrelated.
#pragma once

#include <cstdint>
#include <vector>

#include "core/quant/quant_registry.hpp"
#include "core/synth/tensor_plan.hpp"
#include "core/synth/weight_generator.hpp"

namespace strata::synth {

class BlockPool {
 public:
  static constexpr uint64_t kPoolRows = 256;

  BlockPool(const PlannedTensor& tensor, const WeightGenerator& generator, const QuantRegistry& quants,
            unsigned threads);

  // Writes rows [first_row, first_row + n_rows) of the tensor's blocks to out.
  void fill_rows(uint64_t first_row, uint64_t n_rows, uint8_t* out) const;

 private:
  uint64_t pool_rows_;
  uint64_t blocks_per_row_;
  uint64_t block_bytes_;
  uint64_t seed_;
  std::vector<uint8_t> pool_;  // pool_rows_ rows of blocks
};

}  // namespace strata::synth
