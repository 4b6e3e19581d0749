// A plugin of a kind no host knows.
#include "test_plugin.hpp"

namespace {
strata_plugin_descriptor of_unknown_kind() {
  strata_plugin_descriptor bent = test_plugin::descriptor("test-unknown-kind");
  bent.kind = 99;
  return bent;
}
}  // namespace

STRATA_PLUGIN_QUERY(of_unknown_kind())
