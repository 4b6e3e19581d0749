// What an instance's weights, buffers and caches take, within the option memory_budget_mib where one is set:
// it makes the instance stand in for a GPU of that much memory, so that the expert cache's policy, tests and
// plans run without one. Scratch between ops is not counted.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace strata::cpu {

class MemoryLedger {
 public:
  void set_limit(uint64_t bytes) { limit_ = bytes; }
  // The budget; without one, what is in use plus the host's MemAvailable.
  uint64_t limit() const;
  uint64_t used() const { return used_; }
  // Counts bytes for what; throws sdk::Failure(STRATA_E_OUT_OF_MEMORY) naming what and the sizes past the budget.
  void take(uint64_t bytes, const std::string& what);
  void give_back(uint64_t bytes) { used_ -= std::min(bytes, used_); }

 private:
  uint64_t limit_ = 0;  // 0: no budget
  uint64_t used_ = 0;
};

// "1.25 GiB", or "3.50 MiB" below a GiB
std::string gib_text(uint64_t bytes);

}  // namespace strata::cpu
