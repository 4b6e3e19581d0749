// A plugin whose query returns no descriptor.
#include "strata/plugin.h"

extern "C" STRATA_PLUGIN_EXPORT const strata_plugin_descriptor* strata_plugin_query(void) { return nullptr; }
