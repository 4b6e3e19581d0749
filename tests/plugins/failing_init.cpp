// A plugin whose init rejects its options.
#include "test_plugin.hpp"

namespace {
strata_status init(const strata_host_services*, const char*, strata_error* error) {
  strata::sdk::write_error(error, "option 'threads' must be a number");
  return STRATA_E_INVALID_ARGUMENT;
}
}  // namespace

STRATA_PLUGIN_QUERY(test_plugin::descriptor("test-failing-init", {.init = init}))
