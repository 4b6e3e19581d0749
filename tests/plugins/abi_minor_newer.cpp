// Built for a newer ABI minor than the host's: it may use fields the host does not know, so it is refused.
#include "test_plugin.hpp"

STRATA_PLUGIN_QUERY(test_plugin::with_abi(test_plugin::descriptor("test-abi-minor-newer"), STRATA_ABI_MAJOR,
                                          STRATA_ABI_MINOR + 1))
