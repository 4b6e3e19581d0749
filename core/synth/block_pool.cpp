#include "core/synth/block_pool.hpp"

#include <algorithm>
#include <cstring>

#include "core/synth/random.hpp"
#include "core/util/parallel.hpp"

namespace strata::synth {

BlockPool::BlockPool(const PlannedTensor& tensor, const WeightGenerator& generator, const QuantRegistry& quants,
                     unsigned threads) {
  const auto& type = quants.require(tensor.type);
  const uint64_t row_elements = tensor.row_elements();
  pool_rows_ = std::min(kPoolRows, tensor.rows());
  blocks_per_row_ = row_elements / type.block_elements;
  block_bytes_ = type.block_bytes;
  seed_ = derive_seed(generator.tensor_seed(tensor), "block pool");
  pool_.resize(pool_rows_ * blocks_per_row_ * block_bytes_);
  const uint64_t row_bytes = blocks_per_row_ * block_bytes_;
  parallel_for(pool_rows_, threads, [&](uint64_t row, unsigned) {
    std::vector<float> values(row_elements);
    generator.fill_rows(tensor, row, 1, values.data());
    quants.quantize(tensor.type, values.data(), pool_.data() + row * row_bytes, 1, static_cast<int64_t>(row_elements));
  });
}

void BlockPool::fill_rows(uint64_t first_row, uint64_t n_rows, uint8_t* out) const {
  const uint64_t row_bytes = blocks_per_row_ * block_bytes_;
  for (uint64_t row = first_row; row < first_row + n_rows; ++row) {
    Random random(derive_seed(seed_, row));
    for (uint64_t block = 0; block < blocks_per_row_; ++block) {
      const uint64_t source = random.below(pool_rows_);
      std::memcpy(out, pool_.data() + source * row_bytes + block * block_bytes_, block_bytes_);
      out += block_bytes_;
    }
  }
}

}  // namespace strata::synth
