#include "isa.hpp"

#include "strata/plugin.hpp"

namespace strata::cpu {

void check_isa_name(const std::string& name, const std::string& source) {
  const std::string problem = sdk::cpu_isa_request_problem(source, name);
  if (!problem.empty()) throw sdk::Failure(STRATA_E_INVALID_ARGUMENT, problem);
}

CpuIsa select_isa(const std::string& instance_option, const std::string& manifest_option) {
  const sdk::CpuIsaRequest process = sdk::cpu_isa_request();
  std::string requested = "auto";
  if (!process.name.empty()) {
    check_isa_name(process.name, process.source);
    requested = process.name;
  } else if (!instance_option.empty()) {
    requested = instance_option;  // checked when the options were read
  } else if (!manifest_option.empty()) {
    requested = manifest_option;
  }
  return sdk::choose_cpu_isa(requested.c_str(), sdk::detect_cpu_isa()).isa;
}

}  // namespace strata::cpu
