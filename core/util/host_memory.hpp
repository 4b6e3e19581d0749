// How much host memory can still be taken without swapping.
#pragma once

#include <cstdint>

namespace strata {

// MemAvailable of /proc/meminfo in bytes; the largest value when it cannot be read.
uint64_t host_memory_available();

}  // namespace strata
