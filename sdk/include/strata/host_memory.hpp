// How much host memory can still be taken without swapping: what the core's expert store and backend-cpu's KV
// cache check before they allocate.
#pragma once

#include <cstdint>
#include <fstream>
#include <limits>
#include <string>

namespace strata::sdk {

// MemAvailable of /proc/meminfo in bytes; the largest value when it cannot be read.
inline uint64_t available_host_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::numeric_limits<uint64_t>::max();
}

}  // namespace strata::sdk
