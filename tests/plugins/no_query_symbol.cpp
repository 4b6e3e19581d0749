// A shared library that exports something, but not strata_plugin_query.
#include "strata/plugin.h"

extern "C" STRATA_PLUGIN_EXPORT int strata_plugin_version(void) { return 1; }
