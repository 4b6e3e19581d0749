// Built for the next ABI major: the host must refuse it and name both versions.
#include "test_plugin.hpp"

STRATA_PLUGIN_QUERY(test_plugin::with_abi(test_plugin::descriptor("test-abi-major-newer"), STRATA_ABI_MAJOR + 1, 0))
