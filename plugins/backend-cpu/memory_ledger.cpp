#include "memory_ledger.hpp"

#include <cstdio>
#include <fstream>
#include <limits>

#include "strata/plugin.hpp"

namespace strata::cpu {

uint64_t MemoryLedger::limit() const {
  if (limit_ > 0) return limit_;
  const uint64_t available = available_memory_bytes();
  return available > std::numeric_limits<uint64_t>::max() - used_ ? available : used_ + available;
}

void MemoryLedger::take(uint64_t bytes, const std::string& what) {
  if (limit_ > 0 && (bytes > limit_ || used_ > limit_ - bytes)) {
    throw sdk::Failure(STRATA_E_OUT_OF_MEMORY, what + " needs " + gib_text(bytes) + ", but " + gib_text(used_) +
                                                   " of the instance's memory_budget_mib of " + gib_text(limit_) +
                                                   " are in use");
  }
  used_ += bytes;
}

uint64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::numeric_limits<uint64_t>::max();
}

std::string gib_text(uint64_t bytes) {
  char text[32];
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (uint64_t{1} << 30));
  } else {
    std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / (uint64_t{1} << 20));
  }
  return text;
}

}  // namespace strata::cpu
