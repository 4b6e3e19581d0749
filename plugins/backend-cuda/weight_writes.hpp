// weight_write's copies of host bytes into device memory (the slots of an expert cache). One from pageable memory
// goes through a page-locked staging block the backend owns (the driver may wait for the stream before a copy from
// pageable memory); one from page-locked memory (the core's pinned expert store) is read by the copy engine
// directly. Ordered copies queue on the compute stream; background ones on a copy stream of their own that first
// waits for the work queued so far on the compute stream (ops that still read a slot's old bytes), so that they
// run beside the ops queued after them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace strata::cuda {

// The page-locked memory the staging blocks may hold in all. A block is reused once its copy has landed; a
// write that finds every block busy at this limit waits for the oldest copy, and so for the ops queued before
// that write (the core's swap budget per window keeps its background writes well below it).
inline constexpr size_t kWriteStagingLimitBytes = size_t{256} << 20;

class WeightWrites {
 public:
  enum class Mode { ordered, background };

  WeightWrites() = default;
  ~WeightWrites();
  WeightWrites(const WeightWrites&) = delete;
  WeightWrites& operator=(const WeightWrites&) = delete;

  // Copies bytes to device: fill writes them into the staging block it is given, then the copy is queued.
  // ordered: on stream, after every earlier background copy (so two writes of one slot land in call order);
  // background: on the copy stream, after the work queued on stream so far.
  void copy(Mode mode, cudaStream_t stream, void* device, size_t bytes, const std::function<void(std::byte*)>& fill);
  // The same from page-locked host bytes, which the copy reads directly: they must stay as they are until it
  // lands (strata_weight_write's contract).
  void copy_from(Mode mode, cudaStream_t stream, void* device, const std::byte* host, size_t bytes);
  // Whether every background copy has landed; never waits.
  bool done();
  // Waits for the background copies (before the memory they write is freed); errors are left to later calls.
  void wait() noexcept;

 private:
  struct Block {
    explicit Block(size_t size);
    ~Block();
    Block(const Block&) = delete;
    Block& operator=(const Block&) = delete;
    std::byte* memory = nullptr;
    size_t bytes = 0;
    cudaEvent_t copied = nullptr;  // recorded after the block's last copy
    uint64_t last_use = 0;
  };

  Block& staging_block(size_t bytes);
  // Orders a copy of mode after what it must follow and returns the stream it goes on.
  cudaStream_t copy_stream_for(Mode mode, cudaStream_t stream);
  // After a copy queued on copy_on: marks the last background copy.
  void after_copy(Mode mode, cudaStream_t copy_on);
  void start_copy_stream();

  std::vector<std::unique_ptr<Block>> blocks_;
  size_t held_ = 0;
  uint64_t uses_ = 0;
  cudaStream_t copy_stream_ = nullptr;     // created by the first background copy
  cudaEvent_t compute_point_ = nullptr;    // the compute stream's work before a background copy
  cudaEvent_t background_done_ = nullptr;  // after the last background copy
};

}  // namespace strata::cuda
