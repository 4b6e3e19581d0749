// Declares ABI 1.0, the oldest minor of this major: a host of any later minor still loads it.
#include "test_plugin.hpp"

STRATA_PLUGIN_QUERY(test_plugin::with_abi(test_plugin::descriptor("test-abi-minor-older"), STRATA_ABI_MAJOR, 0))
