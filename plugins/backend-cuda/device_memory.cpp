#include "device_memory.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "cuda_status.hpp"

namespace strata::cuda {

std::string mib_text(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

DeviceAllocation::~DeviceAllocation() { release(); }

DeviceAllocation::DeviceAllocation(DeviceAllocation&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)),
      pointer_(std::exchange(other.pointer_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceAllocation& DeviceAllocation::operator=(DeviceAllocation&& other) noexcept {
  if (this != &other) {
    release();
    budget_ = std::exchange(other.budget_, nullptr);
    pointer_ = std::exchange(other.pointer_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceAllocation::release() noexcept {
  if (pointer_ == nullptr) return;
  cudaFree(pointer_);
  budget_->used_ -= bytes_;
  pointer_ = nullptr;
  bytes_ = 0;
}

VramBudget::VramBudget(size_t free_bytes, size_t reserve_bytes, size_t cap_bytes)
    : free_at_start_(free_bytes),
      reserve_(reserve_bytes),
      limit_(std::min(free_bytes > reserve_bytes ? free_bytes - reserve_bytes : 0, cap_bytes)),
      capped_(cap_bytes < (free_bytes > reserve_bytes ? free_bytes - reserve_bytes : 0)) {}

DeviceAllocation VramBudget::allocate(size_t bytes, const std::string& what) {
  const size_t rounded = bytes == 0 ? 256 : bytes;  // a valid pointer even for empty buffers
  if (rounded > limit_ - used_) {
    const std::string cap =
        capped_ ? ", the budget is capped at " + mib_text(limit_) + " (option memory_budget_mib)" : "";
    throw sdk::Failure(STRATA_E_OUT_OF_MEMORY, what + " needs " + mib_text(rounded) + " of VRAM but " +
                                                   mib_text(limit_ - used_) + " is left (" + mib_text(free_at_start_) +
                                                   " was free at start, " + mib_text(reserve_) +
                                                   " is reserved (--vram-reserve-mib, option vram_reserve_mib)" + cap +
                                                   ", " + mib_text(used_) + " is in use)");
  }
  void* pointer = nullptr;
  check(cudaMalloc(&pointer, rounded), what + ": cudaMalloc of " + mib_text(rounded));
  used_ += rounded;
  return DeviceAllocation(this, pointer, rounded);
}

void* DeviceScratch::get(VramBudget& budget, size_t bytes) {
  if (bytes > memory_.bytes()) {
    DeviceAllocation grown = budget.allocate(bytes + bytes / 2, what_);
    if (memory_.get() != nullptr) outgrown_.push_back(std::move(memory_));
    memory_ = std::move(grown);
  }
  return memory_.get();
}

PinnedHostBuffer::~PinnedHostBuffer() {
  if (memory_ != nullptr) cudaFreeHost(memory_);
}

void* PinnedHostBuffer::get(size_t bytes) {
  if (bytes > bytes_) {
    if (memory_ != nullptr) cudaFreeHost(std::exchange(memory_, nullptr));
    bytes_ = 0;
    check(cudaMallocHost(&memory_, bytes), std::string(what_) + ": page-locked host memory of " + mib_text(bytes));
    bytes_ = bytes;
  }
  return memory_;
}

}  // namespace strata::cuda
