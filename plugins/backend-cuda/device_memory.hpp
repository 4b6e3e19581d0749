// Device memory within a budget: everything the backend allocates (weights, buffers, caches, scratch)
// counts against the VRAM that was free at start minus a reserve (and at most the option memory_budget_mib,
// which makes a large GPU act as a smaller one), so a model that does not fit fails at load with the tensor's
// name and sizes instead of at some later allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::cuda {

class VramBudget;

// One cudaMalloc, freed (and given back to its budget) with the object.
class DeviceAllocation {
 public:
  DeviceAllocation() = default;
  ~DeviceAllocation();
  DeviceAllocation(DeviceAllocation&& other) noexcept;
  DeviceAllocation& operator=(DeviceAllocation&& other) noexcept;

  void* get() const { return pointer_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(pointer_);
  }
  size_t bytes() const { return bytes_; }

 private:
  friend class VramBudget;
  DeviceAllocation(VramBudget* budget, void* pointer, size_t bytes)
      : budget_(budget), pointer_(pointer), bytes_(bytes) {}
  void release() noexcept;

  VramBudget* budget_ = nullptr;
  void* pointer_ = nullptr;
  size_t bytes_ = 0;
};

class VramBudget {
 public:
  // free_bytes: what the device had free when the backend started; cap_bytes: the most the budget may be.
  VramBudget(size_t free_bytes, size_t reserve_bytes, size_t cap_bytes = SIZE_MAX);

  // Throws sdk::Failure(STRATA_E_OUT_OF_MEMORY) naming what, its size and what is left.
  DeviceAllocation allocate(size_t bytes, const std::string& what);
  size_t used() const { return used_; }
  size_t limit() const { return limit_; }
  // Whether the cap, not the free VRAM less the reserve, set the limit.
  bool capped() const { return capped_; }

 private:
  friend class DeviceAllocation;
  size_t free_at_start_, reserve_, limit_, used_ = 0;
  bool capped_;
};

// Scratch that grows on demand and is kept between ops, so that steady-state ops allocate nothing. Growing
// keeps the smaller allocations until the scratch goes: queued work and captured step graphs (a decode
// step's graph recorded before a longer prompt grew the scratch) may still point into them. Each growth
// is by half again, so what is kept stays below twice the largest size.
class DeviceScratch {
 public:
  explicit DeviceScratch(const char* what) : what_(what) {}
  // At least bytes of device memory.
  void* get(VramBudget& budget, size_t bytes);
  template <class T>
  T* get(VramBudget& budget, size_t count) {
    return static_cast<T*>(get(budget, count * sizeof(T)));
  }

 private:
  const char* what_;
  DeviceAllocation memory_;
  std::vector<DeviceAllocation> outgrown_;
};

// Page-locked host memory that grows on demand (its earlier contents are not kept): a step graph's positions,
// and buffer_read's landing place, since a copy into pageable memory goes through the driver's small
// staging buffers in turns (a decode step's 600 KB of logits kept the host ~180 us that way, ~60 us here
// with the memcpy; tg128 296.6 -> 304.4 t/s on the H200). Larger reads go through it in pieces of
// kReadStagingBytes.
inline constexpr size_t kReadStagingBytes = size_t{16} << 20;
class PinnedHostBuffer {
 public:
  explicit PinnedHostBuffer(const char* what) : what_(what) {}
  ~PinnedHostBuffer();
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;
  // At least bytes of page-locked memory: the same memory while bytes stays within what it holds.
  void* get(size_t bytes);

 private:
  const char* what_;
  void* memory_ = nullptr;
  size_t bytes_ = 0;
};

std::string mib_text(size_t bytes);

}  // namespace strata::cuda
