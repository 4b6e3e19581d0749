// A quant table whose first entry is fine (Q5_0) and whose second declares Q8_0 with the wrong block
// size: the plugin is skipped and none of its types, not even the good one, reach the registry.
#include "test_plugin.hpp"

namespace {

strata_status decode_nothing(const void*, float*, int64_t, strata_error*) { return STRATA_OK; }

const strata_quant_type kQ5_0 = test_plugin::decode_only_type(6, "Q5_0", 32, 22, decode_nothing);
const strata_quant_type kWrongQ8_0 = test_plugin::decode_only_type(8, "Q8_0", 32, 30, decode_nothing);
const strata_quant_type* const kTypes[] = {&kQ5_0, &kWrongQ8_0};
const strata_quant_table kTable = {.struct_size = sizeof(strata_quant_table), .type_count = 2, .types = kTypes};

}  // namespace

STRATA_PLUGIN_QUERY(strata::sdk::make_descriptor(STRATA_PLUGIN_KIND_QUANT, "test-bad-quant-table", "0.1-test", &kTable))
