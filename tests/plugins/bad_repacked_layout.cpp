// A quant type (Q5_0) whose repacked layout for the GPU (ABI 1.6) holds 64 values a block where Q5_0 holds
// 32: a backend would convert blocks that do not line up, so the plugin is skipped.
#include "test_plugin.hpp"

namespace {

strata_status decode_nothing(const void*, float*, int64_t, strata_error*) { return STRATA_OK; }
strata_status repack_nothing(const void*, void*, int64_t, strata_error*) { return STRATA_OK; }

const strata_quant_type kWideLayout =
    test_plugin::decode_only_type(6u | STRATA_REPACKED_TYPE_BIT, "Q5_0 (wide)", 64, 44, decode_nothing);

strata_quant_type q5_0() {
  strata_quant_type type = test_plugin::decode_only_type(6, "Q5_0", 32, 22, decode_nothing);
  type.cuda_repacked = &kWideLayout;
  type.cuda_repack = repack_nothing;
  return type;
}
const strata_quant_type kQ5_0 = q5_0();
const strata_quant_type* const kTypes[] = {&kQ5_0};
const strata_quant_table kTable = {.struct_size = sizeof(strata_quant_table), .type_count = 1, .types = kTypes};

}  // namespace

STRATA_PLUGIN_QUERY(strata::sdk::make_descriptor(STRATA_PLUGIN_KIND_QUANT, "test-bad-repacked-layout", "0.1-test",
                                                 &kTable))
