// weight_write's copies of host bytes into device memory (the slots of an expert cache). One from pageable memory
// goes through a page-locked staging block the backend owns (the driver may wait for the stream before a copy from
// pageable memory); one from page-locked memory (the core's pinned expert store) is read by the copy engine
// directly. Every copy queues on a copy stream of its own, after the work queued so far on the compute stream
// (ops that may still read a slot's old bytes; nothing when that stream is idle), so that it runs beside the ops
// queued after it. An ordered copy marks its weight with a fence: an op that reads the weight waits for it
// (await), an op that does not runs on. A fence's event is recorded once per run of copies into one weight (when
// a copy into another weight follows, or an op awaits it): a decode step's staging writes a few slots of each.
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

// A weight's last ordered copy: the op that reads it next waits for this.
struct WriteFence {
  WriteFence() = default;
  ~WriteFence();
  WriteFence(const WriteFence&) = delete;
  WriteFence& operator=(const WriteFence&) = delete;
  cudaEvent_t landed = nullptr;  // recorded on the copy stream after the copies; created by the first
  uint64_t copy = 0;             // the last copy's number (WeightWrites' count); 0: none
};

class WeightWrites {
 public:
  enum class Mode { ordered, background };

  WeightWrites() = default;
  ~WeightWrites();
  WeightWrites(const WeightWrites&) = delete;
  WeightWrites& operator=(const WeightWrites&) = delete;

  // Copies bytes to device: fill writes them into the staging block it is given, then the copy is queued on the
  // copy stream after the work queued on stream so far (copies land in call order). ordered: fence is set, so
  // that ops reading the weight wait (await); background: the core asks done() before it reads.
  void copy(Mode mode, cudaStream_t stream, WriteFence& fence, void* device, size_t bytes,
            const std::function<void(std::byte*)>& fill);
  // The same from page-locked host bytes, which the copy reads directly: they must stay as they are until it
  // lands (strata_weight_write's contract).
  void copy_from(Mode mode, cudaStream_t stream, WriteFence& fence, void* device, const std::byte* host, size_t bytes);
  // Makes stream wait for a weight's ordered copies before the op about to read it; nothing if it waited already.
  void await(WriteFence& fence, cudaStream_t stream);
  // Makes stream wait for every ordered copy so far (before a step graph records: a capture cannot wait on the
  // copy stream's events, and every fence is then behind it).
  void await_all(cudaStream_t stream);
  // Whether every background copy has landed; never waits.
  bool done();
  // Waits for every copy (before the memory they write is freed) and forgets fence, whose weight is going; errors
  // are left to later calls.
  void wait(const WriteFence* fence = nullptr) noexcept;

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
  // Orders a copy after the ops queued on stream so far and returns the copy stream.
  cudaStream_t copy_stream_after(cudaStream_t stream);
  // After a copy queued on the copy stream: marks the last background copy, or the fence of an ordered one.
  void after_copy(Mode mode, WriteFence& fence);
  // Records the event of the fence whose copies have none yet, if any.
  void record_unrecorded();
  void start_copy_stream();

  std::vector<std::unique_ptr<Block>> blocks_;
  size_t held_ = 0;
  uint64_t uses_ = 0;
  cudaStream_t copy_stream_ = nullptr;     // created by the first copy
  cudaEvent_t compute_point_ = nullptr;    // the compute stream's work before a copy
  cudaEvent_t background_done_ = nullptr;  // after the last background copy
  cudaEvent_t all_copied_ = nullptr;       // recorded when await_all asks
  WriteFence* unrecorded_ = nullptr;       // the fence of the last ordered copies, its event not yet recorded
  uint64_t ordered_copies_ = 0;            // ordered copies so far: a fence's number
  uint64_t awaited_ = 0;                   // the stream waited for every ordered copy up to this one
};

}  // namespace strata::cuda
