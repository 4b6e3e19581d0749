// A plugin that cannot run on this machine and says why through its probe.
#include "test_plugin.hpp"

namespace {
strata_status probe(int32_t*, strata_error* error) {
  strata::sdk::write_error(error, "needs the frobnicator instruction set");
  return STRATA_E_UNSUPPORTED;
}
}  // namespace

STRATA_PLUGIN_QUERY(test_plugin::descriptor("test-unsupported-probe", {.probe = probe}))
