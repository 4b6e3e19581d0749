// Built for ABI 1.0, the oldest minor of this major: the host still loads it (its tables are read as the 1.0
// tables they are).
#include "test_plugin.hpp"

STRATA_PLUGIN_QUERY(test_plugin::with_abi(test_plugin::descriptor("test-abi-minor-older"), STRATA_ABI_MAJOR, 0))
