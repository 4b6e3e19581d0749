#include "weight_writes.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "cuda_status.hpp"
#include "device_memory.hpp"

namespace strata::cuda {
namespace {

// Staging blocks are whole MiBs, so that a block fits the next matrix of a similar size.
constexpr size_t kStagingGranule = size_t{1} << 20;

// Whether the event's work has completed (an event never recorded has), without waiting.
bool completed(cudaEvent_t event, const char* what) {
  const cudaError_t status = cudaEventQuery(event);
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();  // not an error: left as the last error, it would fail the next launch check
    return false;
  }
  check(status, what);
  return true;
}

}  // namespace

WeightWrites::Block::Block(size_t size) {
  check(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming), "weight_write: creating an event");
  const cudaError_t status = cudaMallocHost(reinterpret_cast<void**>(&memory), size);
  if (status != cudaSuccess) {
    cudaEventDestroy(copied);
    check(status, "weight_write: page-locked staging of " + mib_text(size));
  }
  bytes = size;
}

WeightWrites::Block::~Block() {
  cudaEventSynchronize(copied);  // the copy may still read the memory
  cudaFreeHost(memory);
  cudaEventDestroy(copied);
}

WriteFence::~WriteFence() {
  if (landed != nullptr) cudaEventDestroy(landed);
}

WeightWrites::~WeightWrites() {
  wait();
  blocks_.clear();
  for (cudaEvent_t event : {compute_point_, background_done_, all_copied_}) {
    if (event != nullptr) cudaEventDestroy(event);
  }
  if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
}

WeightWrites::Block& WeightWrites::staging_block(size_t bytes) {
  const size_t wanted = (bytes + kStagingGranule - 1) / kStagingGranule * kStagingGranule;
  for (;;) {
    // The smallest idle block that holds the bytes.
    Block* best = nullptr;
    for (const auto& block : blocks_) {
      if (block->bytes >= bytes && (best == nullptr || block->bytes < best->bytes) &&
          completed(block->copied, "weight_write: a staging block's copy")) {
        best = block.get();
      }
    }
    if (best != nullptr) return *best;
    // Else a new block, within the limit: idle blocks too small go first. A matrix beyond the limit gets a block
    // of its own once no other is held.
    if (held_ + wanted > kWriteStagingLimitBytes) {
      std::erase_if(blocks_, [&](const std::unique_ptr<Block>& block) {
        if (!completed(block->copied, "weight_write: a staging block's copy")) return false;
        held_ -= block->bytes;
        return true;
      });
    }
    if (held_ + wanted <= kWriteStagingLimitBytes || blocks_.empty()) {
      blocks_.push_back(std::make_unique<Block>(wanted));
      held_ += wanted;
      return *blocks_.back();
    }
    // Every block is busy at the limit: the oldest copy frees one.
    const auto oldest = std::min_element(blocks_.begin(), blocks_.end(),
                                         [](const auto& a, const auto& b) { return a->last_use < b->last_use; });
    check(cudaEventSynchronize((*oldest)->copied), "weight_write: waiting for a staging block");
  }
}

// The copy stream last: it says whether the events exist (a failure part way leaves nothing to create twice).
void WeightWrites::start_copy_stream() {
  if (copy_stream_ != nullptr) return;
  for (cudaEvent_t* event : {&compute_point_, &background_done_, &all_copied_}) {
    if (*event == nullptr) {
      check(cudaEventCreateWithFlags(event, cudaEventDisableTiming), "weight_write: creating an event");
    }
  }
  check(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "weight_write: creating a copy stream");
}

cudaStream_t WeightWrites::copy_stream_after(cudaStream_t stream) {
  start_copy_stream();
  // An idle stream has nothing queued that could still read the slot (the hybrid placement's copies follow a
  // read of the routing, which waited for the stream): two API calls saved per copy.
  const cudaError_t idle = cudaStreamQuery(stream);
  if (idle == cudaSuccess) return copy_stream_;
  if (idle != cudaErrorNotReady) check(idle, "weight_write: asking whether the stream is idle");
  check(cudaEventRecord(compute_point_, stream), "weight_write: marking the ops before it");
  check(cudaStreamWaitEvent(copy_stream_, compute_point_), "weight_write: ordering the copy after them");
  return copy_stream_;
}

void WeightWrites::record_unrecorded() {
  if (unrecorded_ == nullptr) return;
  check(cudaEventRecord(unrecorded_->landed, copy_stream_), "weight_write: marking the copies");
  unrecorded_ = nullptr;
}

void WeightWrites::after_copy(Mode mode, WriteFence& fence) {
  if (mode == Mode::background) {
    check(cudaEventRecord(background_done_, copy_stream_), "weight_write: marking the copy");
    return;
  }
  if (unrecorded_ != &fence) record_unrecorded();
  if (fence.landed == nullptr) {
    check(cudaEventCreateWithFlags(&fence.landed, cudaEventDisableTiming), "weight_write: creating an event");
  }
  unrecorded_ = &fence;
  fence.copy = ++ordered_copies_;
}

void WeightWrites::copy(Mode mode, cudaStream_t stream, WriteFence& fence, void* device, size_t bytes,
                        const std::function<void(std::byte*)>& fill) {
  Block& block = staging_block(bytes);
  fill(block.memory);
  block.last_use = ++uses_;
  const cudaStream_t copy_on = copy_stream_after(stream);
  check(cudaMemcpyAsync(device, block.memory, bytes, cudaMemcpyHostToDevice, copy_on), "weight_write: the copy");
  check(cudaEventRecord(block.copied, copy_on), "weight_write: marking the copy");
  after_copy(mode, fence);
}

void WeightWrites::copy_from(Mode mode, cudaStream_t stream, WriteFence& fence, void* device, const std::byte* host,
                             size_t bytes) {
  const cudaStream_t copy_on = copy_stream_after(stream);
  check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, copy_on), "weight_write: the copy");
  after_copy(mode, fence);
}

void WeightWrites::await(WriteFence& fence, cudaStream_t stream) {
  if (fence.copy <= awaited_) return;
  if (unrecorded_ == &fence) record_unrecorded();
  check(cudaStreamWaitEvent(stream, fence.landed), "waiting for a weight_write's copies");
}

void WeightWrites::await_all(cudaStream_t stream) {
  if (ordered_copies_ <= awaited_) return;
  record_unrecorded();
  check(cudaEventRecord(all_copied_, copy_stream_), "weight_write: marking the copies");
  check(cudaStreamWaitEvent(stream, all_copied_), "waiting for the weight_write copies");
  awaited_ = ordered_copies_;
}

bool WeightWrites::done() { return copy_stream_ == nullptr || completed(background_done_, "weight_writes_done"); }

void WeightWrites::wait(const WriteFence* fence) noexcept {
  if (fence != nullptr && fence == unrecorded_) unrecorded_ = nullptr;
  if (copy_stream_ != nullptr) cudaStreamSynchronize(copy_stream_);
}

}  // namespace strata::cuda
