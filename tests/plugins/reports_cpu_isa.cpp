// A quant type (Q5_1) whose CPU dot kernel writes, in place of products, the SIMD level the SDK chose for this
// plugin's kernels (strata/cpu_isa.hpp): shows that the host's --cpu-isa reaches a plugin's kernels through
// the host services and the init make_descriptor gives a plugin without one of its own.
#include "strata/cpu_isa.hpp"
#include "test_plugin.hpp"

namespace {

strata_status decode_nothing(const void*, float*, int64_t, strata_error*) { return STRATA_OK; }

void write_level(int64_t, int64_t n_rows, const void*, size_t, const void*, float* out) {
  for (int64_t r = 0; r < n_rows; ++r) out[r] = static_cast<float>(strata::sdk::cpu_isa());
}

const strata_quant_type kQ5_1 = [] {
  strata_quant_type type = test_plugin::decode_only_type(7, "Q5_1", 32, 24, decode_nothing);
  type.cpu_dot_rows = write_level;
  return type;
}();
const strata_quant_type* const kTypes[] = {&kQ5_1};
const strata_quant_table kTable = {.struct_size = sizeof(strata_quant_table), .type_count = 1, .types = kTypes};

}  // namespace

STRATA_PLUGIN_QUERY(strata::sdk::make_descriptor(STRATA_PLUGIN_KIND_QUANT, "test-reports-cpu-isa", "0.1-test", &kTable))
