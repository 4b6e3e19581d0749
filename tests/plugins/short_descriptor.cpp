// A descriptor whose struct_size stops before probe, init and shutdown: too small for ABI 1.0.
#include "test_plugin.hpp"

namespace {
strata_plugin_descriptor truncated() {
  strata_plugin_descriptor bent = test_plugin::descriptor("test-short-descriptor");
  bent.struct_size = STRATA_FIELD_END(strata_plugin_descriptor, table);
  return bent;
}
}  // namespace

STRATA_PLUGIN_QUERY(truncated())
