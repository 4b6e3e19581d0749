#include "cpu_topology.hpp"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace strata::cpu {
namespace {

bool read_int(const std::string& path, int& value) {
  std::ifstream file(path);
  return static_cast<bool>(file >> value);
}

}  // namespace

int physical_core_count() {
  const int fallback = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return fallback;
  std::set<std::pair<int, int>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    int package = 0, core = 0;
    if (!read_int(topology + "physical_package_id", package) || !read_int(topology + "core_id", core)) {
      return fallback;
    }
    cores.emplace(package, core);
  }
  return cores.empty() ? fallback : static_cast<int>(cores.size());
}

}  // namespace strata::cpu
