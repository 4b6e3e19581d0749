// The CPU backend as a plugin. It runs on any machine (the baseline x86-64 kernels need nothing more),
// with the lowest score, so a GPU backend wins when one can run.
#include "strata/plugin.hpp"
#include "cpu_backend.hpp"

namespace {

strata_status probe(int32_t* score, strata_error*) {
  *score = 10;
  return STRATA_OK;
}

strata_status init(const strata_host_services* host, const char* options_json, strata_error* error) {
  return strata::sdk::guarded(error, [&] {
    strata::sdk::adopt_host_settings(host);
    strata::cpu::set_plugin_options(options_json);
  });
}

}  // namespace

STRATA_PLUGIN_QUERY(::strata::sdk::make_descriptor(STRATA_PLUGIN_KIND_BACKEND, "backend-cpu", "1.0.0",
                                                   &::strata::cpu::cpu_backend_table(),
                                                   {.probe = &probe, .init = &init}))
