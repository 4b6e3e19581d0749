// The objects behind the backend ABI's opaque handles, and checked access to them for the ops.
// A backend instance is driven by one host thread at a time; its ops are queued in call order on one
// stream, and only buffer_read (and the ops that need device results on the host) wait for it. Inside a
// concurrent region (ABI 1.3) the matmuls (and route_experts) take turns over a few streams (lanes) that fork
// from the first and join it again at the region's end; every op queues on the current lane with that lane's
// cuBLAS handle and scratches, so ops running at once share no scratch.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "cuda_status.hpp"
#include "device_memory.hpp"
#include "strata/backend.h"
#include "strata/backend_checks.hpp"
#include "strata/plugin.hpp"
#include "weight_kernels.hpp"
#include "weight_writes.hpp"

struct strata_buffer {
  strata::cuda::DeviceAllocation memory;
  size_t bytes = 0;
  void* base() const { return memory.get(); }

  // The norms and decode attention leave their output also rounded to 8 bits (strata_quant_type::
  // cuda_matvec_q8's layout: a level for every float of the buffer, then one scale per 32 values), for the
  // matvecs that read it next. Every op that writes the buffer bumps generation (backend_checks' non-const
  // elements() calls note_write), so the rounded copy is current while rounded_generation == generation:
  // ops that touch a buffer run in call order (a concurrent region's ops touch no buffer another writes),
  // so the host's count says what the device will hold when a later op runs.
  uint64_t generation = 0;
  strata::cuda::DeviceAllocation rounded;
  uint64_t rounded_generation = 0;
  int64_t rounded_rows = 0, rounded_width = 0;

  void note_write() { ++generation; }
  // For an op that writes rows x width of the buffer and its rounded copy in one launch: the copy's memory
  // before the launch (allocated on first use), mark_rounded after it.
  void allocate_rounded(strata::cuda::VramBudget& budget) {
    if (rounded.get() == nullptr) rounded = budget.allocate(rounded_bytes(), "an 8-bit copy of a buffer");
  }
  void mark_rounded(int64_t rows, int64_t width) {
    rounded_generation = generation;
    rounded_rows = rows;
    rounded_width = width;
  }
  size_t rounded_levels_bytes() const { return (bytes / sizeof(float) + 15) / 16 * 16; }
  size_t rounded_bytes() const { return rounded_levels_bytes() + bytes / sizeof(float) / 32 * sizeof(float); }
  bool has_rounded(int64_t rows, int64_t width) const {
    return rounded.get() != nullptr && rounded_generation == generation && width == rounded_width &&
           rows <= rounded_rows;
  }
  int8_t* rounded_levels() const { return rounded.as<int8_t>(); }
  float* rounded_scales() const { return reinterpret_cast<float*>(rounded.as<std::byte>() + rounded_levels_bytes()); }
};

struct strata_weight {
  std::string name;
  const strata_quant_type* type = nullptr;    // the file's type; kernels and row_bytes are its device layout's:
  const strata_quant_type* layout = nullptr;  // type, or type's cuda_repacked where the weight was repacked
  strata::cuda::WeightKernels kernels;
  int64_t ne0 = 0, ne1 = 0, ne2 = 0;
  size_t row_bytes = 0;             // on the device
  size_t host_row_bytes = 0;        // in the file
  const std::byte* host = nullptr;  // the host's bytes (valid until weight_free): get_rows decodes there
  bool slots = false;               // made by weight_alloc: no host bytes; weight_write fills its matrices
  strata::cuda::DeviceAllocation device;
  // Its last ordered weight_writes: ops reading it wait (WeightWrites::await, which records the fence's event
  // where the copies have none yet: hence mutable, for ops that take the weight as const).
  mutable strata::cuda::WriteFence written;

  size_t matrix_bytes() const { return static_cast<size_t>(ne1) * row_bytes; }
  const std::byte* matrix(int64_t expert) const {
    return device.as<const std::byte>() + static_cast<size_t>(expert) * matrix_bytes();
  }
};

namespace strata::cuda {

// A strata_buffer that grows on demand, for an op's rows between two of its kernels; like DeviceScratch it
// keeps what it outgrew for queued work and recorded step graphs.
class ScratchBuffer {
 public:
  explicit ScratchBuffer(const char* what) : what_(what) {}
  strata_buffer& get(VramBudget& budget, size_t bytes) {
    if (bytes > buffer_.bytes) {
      strata_buffer grown;
      grown.bytes = bytes + bytes / 2;
      grown.memory = budget.allocate(grown.bytes, what_);
      if (buffer_.memory.get() != nullptr) outgrown_.push_back(std::move(buffer_));
      buffer_ = std::move(grown);
    }
    return buffer_;
  }

 private:
  const char* what_;
  strata_buffer buffer_;
  std::vector<strata_buffer> outgrown_;
};

// A stream and what ops queued on it use privately.
struct StreamLane {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;  // bound to stream (a handle's workspace is not shared between streams)
  cudaEvent_t done = nullptr;       // recorded at a region's end, for the first lane to wait on
  DeviceScratch weight_tile{"f16 weight tile scratch"};
  DeviceScratch activations_f16{"f16 activation scratch"};
  DeviceScratch positions{"positions scratch"};
  DeviceScratch moe_slots{"moe slot scratch"};
  DeviceScratch moe_floats{"moe activation scratch"};
  DeviceScratch gemm_tiles{"gemm tile list scratch"};
  DeviceScratch attention_splits{"attention split state scratch"};
  // A normed input's norm (with its 8-bit copy) and x + y, where its op runs the norm as a kernel of its own.
  ScratchBuffer normed_rows{"normed input scratch"};
  DeviceScratch residual_sum{"normed input sum scratch"};
  // route_experts' count of its blocks that are done (one unsigned, 0 between launches): the last one routes.
  // A lane's own, so that launches on two lanes at once do not count into one.
  DeviceAllocation router_blocks_done;
};

// Matmuls of a q/k/v region run at once on this many streams.
inline constexpr int kStreamLanes = 3;

}  // namespace strata::cuda

struct strata_backend {
  // budget_bytes: the option memory_budget_mib (SIZE_MAX without it), a cap on the VRAM budget.
  strata_backend(const strata_backend_config& config, int device, size_t reserve_bytes, size_t budget_bytes);
  ~strata_backend();
  strata_backend(const strata_backend&) = delete;
  strata_backend& operator=(const strata_backend&) = delete;

  const strata_quant_type* find_type(uint32_t type_id) const {
    return find_quant_type != nullptr ? find_quant_type(quant_context, type_id) : nullptr;
  }
  // Copies host values to a scratch (positions, ids); the copy is queued on the stream.
  template <class T>
  const T* upload(strata::cuda::DeviceScratch& scratch, const T* values, size_t count);

  // The lane ops queue on now, and its stream and cuBLAS handle (the first lane's outside a region).
  strata::cuda::StreamLane& lane() { return lanes[current_lane]; }
  // In a concurrent region, moves the op about to queue to the next lane; outside one, nothing.
  void take_next_lane();
  void use_lane(int index);
  // Whether [memory, memory + bytes) lies in one of host_alloc's page-locked blocks: the device reaches it directly.
  bool in_host_memory(const void* memory, size_t bytes) const {
    const auto* start = static_cast<const std::byte*>(memory);
    const auto block = host_memory.upper_bound(start);
    return block != host_memory.begin() && start + bytes <= std::prev(block)->first + std::prev(block)->second;
  }

  int device;
  bool repack_weights = false;  // store weights in their type's repacked layout where it has one
  void* quant_context;
  const strata_quant_type* (*find_quant_type)(void* quant_context, uint32_t type_id);
  strata::cuda::VramBudget budget;  // before the lanes: their scratches give their memory back to it
  std::array<strata::cuda::StreamLane, strata::cuda::kStreamLanes> lanes;
  int current_lane = 0;
  int region_ops = -1;                 // ops placed in the open concurrent region; -1 outside one
  cudaEvent_t region_start = nullptr;  // recorded on the first lane at concurrent_begin
  cudaStream_t stream = nullptr;       // lane().stream
  cublasHandle_t cublas = nullptr;     // lane().cublas
  std::string description;
  strata::cuda::PinnedHostBuffer read_staging{"buffer_read staging"};
  std::map<const std::byte*, size_t> host_memory;  // host_alloc's page-locked blocks: start, bytes
  strata_graph* recording = nullptr;               // the step graph being captured on the first lane's stream, if any
  strata::cuda::WeightWrites weight_writes;        // weight_write's staging and copy stream

 private:
  void release_lanes();
};

namespace strata::cuda {

using sdk::deref;
using sdk::elements;
using sdk::floats;
using sdk::invalid_argument;

// An F32 vector weight of at least width values (norm weights, biases), on the device.
const float* f32_vector(const strata_weight* weight, int64_t width, const char* what);

// Op positions on the device: those of the step graph being recorded (they must match), else a copy.
const int32_t* device_positions(strata_backend& backend, const int32_t* positions, int32_t n);

// Blocks of threads covering n items.
inline unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace strata::cuda

template <class T>
const T* strata_backend::upload(strata::cuda::DeviceScratch& scratch, const T* values, size_t count) {
  T* device_values = scratch.get<T>(budget, count);
  // From pageable memory the copy is staged before the call returns, so values may go right after.
  strata::cuda::check(cudaMemcpyAsync(device_values, values, count * sizeof(T), cudaMemcpyHostToDevice, stream),
                      "copying op inputs to the GPU");
  return device_values;
}
