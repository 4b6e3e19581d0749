#include "memory_ledger.hpp"

#include <cstdio>
#include <limits>

#include "strata/host_memory.hpp"
#include "strata/plugin.hpp"

namespace strata::cpu {

uint64_t MemoryLedger::limit() const {
  if (limit_ > 0) return limit_;
  const uint64_t available = sdk::available_host_memory();
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
