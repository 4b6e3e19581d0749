#include "core/util/host_memory.hpp"

#include <fstream>
#include <limits>
#include <string>

namespace strata {

uint64_t host_memory_available() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::numeric_limits<uint64_t>::max();
}

}  // namespace strata
