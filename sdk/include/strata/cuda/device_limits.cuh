// The current device's properties that the launchers choose kernels by (multiprocessors, the shared memory a
// block may opt in to), each optionally capped from the environment so that a larger GPU takes a smaller card's
// choices: STRATA_CUDA_CAP_SMS and STRATA_CUDA_CAP_SHARED_KIB (positive integers; unset or anything else: no
// cap). With PTX for an older architecture (scripts/device-test.sh --ptx 75|86, which also sets these to an
// RTX 2080 Ti's or an RTX 3060's values) an H100 then runs the code paths our users' cards take. A cap only
// narrows what the device offers; occupancy per multiprocessor stays the device's own.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>

#include "strata/cuda/launch.cuh"

namespace strata::sdk::cuda {

// variable's value if it is a positive integer, else 0: no cap (the callers read it once per process).
inline long device_cap(const char* variable) {
  const char* text = std::getenv(variable);
  if (text == nullptr) return 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  return end != text && *end == '\0' && value > 0 ? value : 0;
}

// The multiprocessors of the current device (at most STRATA_CUDA_CAP_SMS).
inline int multiprocessor_count() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 1;
  const int sms = asked_once<int, int>(device, [device] {
    int count = 1;
    if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      count = 1;
      (void)cudaGetLastError();
    }
    return count;
  });
  static const long cap = device_cap("STRATA_CUDA_CAP_SMS");
  return cap > 0 ? static_cast<int>(std::min<long>(sms, cap)) : sms;
}

// Lets kernel take `bytes` of dynamic shared memory a block (beyond 48 KiB a kernel must opt in); false, with
// no error left behind, where the device gives a block less, or more than STRATA_CUDA_CAP_SHARED_KIB KiB would
// be needed: the caller then takes a kernel that needs less.
inline bool opt_in_shared_memory(const void* kernel, size_t bytes) {
  static const long cap_kib = device_cap("STRATA_CUDA_CAP_SHARED_KIB");
  if (cap_kib > 0 && bytes > static_cast<size_t>(cap_kib) * 1024) return false;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)) ==
      cudaSuccess) {
    return true;
  }
  (void)cudaGetLastError();
  return false;
}

}  // namespace strata::sdk::cuda
