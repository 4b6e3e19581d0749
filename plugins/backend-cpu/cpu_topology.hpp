// How many threads the backend runs by default.
#pragma once

namespace strata::cpu {

// Physical cores this process may run on: distinct (package, core) pairs among the CPUs of its affinity
// mask, read from /sys/devices/system/cpu; hardware_concurrency() when the topology cannot be read.
// Hyperthreads share a core's execution units, so matmul gains nothing from them.
int physical_core_count();

}  // namespace strata::cpu
