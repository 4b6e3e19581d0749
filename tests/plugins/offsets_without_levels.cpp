// A quant type (Q4_K) that offers int8 offsets (ABI 1.10) but not the int8 rows they belong to
// (cpu_rows_to_int8): a backend's int8 kernel would have no levels to add them to, so the plugin is skipped.
#include "test_plugin.hpp"

namespace {

strata_status decode_nothing(const void*, float*, int64_t, strata_error*) { return STRATA_OK; }
void offsets_of_nothing(int64_t, int64_t, const void*, size_t, int16_t*, float*) {}

strata_quant_type q4_k() {
  strata_quant_type type = test_plugin::decode_only_type(12, "Q4_K", 256, 144, decode_nothing);
  type.cpu_rows_int8_offsets = offsets_of_nothing;
  return type;
}
const strata_quant_type kQ4K = q4_k();
const strata_quant_type* const kTypes[] = {&kQ4K};
const strata_quant_table kTable = {.struct_size = sizeof(strata_quant_table), .type_count = 1, .types = kTypes};

}  // namespace

STRATA_PLUGIN_QUERY(strata::sdk::make_descriptor(STRATA_PLUGIN_KIND_QUANT, "test-offsets-without-levels", "0.1-test",
                                                 &kTable))
