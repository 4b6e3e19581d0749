#include "cpu_topology.hpp"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <utility>

namespace strata::cpu {
namespace {

bool read_int(const std::string& path, int& value) {
  std::ifstream file(path);
  return static_cast<bool>(file >> value);
}

// (package, core) -> its lowest logical CPU, over the CPUs of this process's affinity mask; empty when the
// topology cannot be read.
std::map<std::pair<int, int>, int> allowed_cores() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return {};
  std::map<std::pair<int, int>, int> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    int package = 0, core = 0;
    if (!read_int(topology + "physical_package_id", package) || !read_int(topology + "core_id", core)) return {};
    cores.emplace(std::pair(package, core), cpu);
  }
  return cores;
}

}  // namespace

int physical_core_count() {
  const auto cores = allowed_cores();
  return cores.empty() ? static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))
                       : static_cast<int>(cores.size());
}

std::vector<int> one_cpu_per_core() {
  std::vector<int> cpus;
  for (const auto& [core, cpu] : allowed_cores()) cpus.push_back(cpu);
  return cpus;
}

}  // namespace strata::cpu
