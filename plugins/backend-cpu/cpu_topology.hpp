// The CPU cores this process may use: how many threads the backend runs by default, and where pinned ones go.
#pragma once

#include <vector>

namespace strata::cpu {

// Physical cores this process may run on: distinct (package, core) pairs among the CPUs of its affinity
// mask, read from /sys/devices/system/cpu; hardware_concurrency() when the topology cannot be read.
// Hyperthreads share a core's execution units, so matmul gains nothing from them.
int physical_core_count();

// One logical CPU of each of those physical cores (the lowest numbered), by package and core; empty when the
// topology cannot be read. What pinned pool threads are pinned to.
std::vector<int> one_cpu_per_core();

}  // namespace strata::cpu
