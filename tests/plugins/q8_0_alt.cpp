// A second provider of Q8_0 (the core offers it too), to test conflicts and the manifest's "prefer".
// Decode only: its quantize entry is NULL, which the ABI allows.
#include <cstring>

#include "strata/half.hpp"
#include "test_plugin.hpp"

namespace {

strata_status dequantize(const void* blocks, float* out, int64_t n_blocks, strata_error*) {
  const auto* bytes = static_cast<const uint8_t*>(blocks);
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint16_t d_bits;
    std::memcpy(&d_bits, bytes + b * 34, 2);
    const float d = strata::sdk::fp16_to_fp32(d_bits);
    for (int i = 0; i < 32; ++i) out[b * 32 + i] = d * static_cast<int8_t>(bytes[b * 34 + 2 + i]);
  }
  return STRATA_OK;
}

const strata_quant_type kQ8_0 = test_plugin::decode_only_type(8, "Q8_0", 32, 34, dequantize);
const strata_quant_type* const kTypes[] = {&kQ8_0};
const strata_quant_table kTable = {.struct_size = sizeof(strata_quant_table), .type_count = 1, .types = kTypes};

}  // namespace

STRATA_PLUGIN_QUERY(strata::sdk::make_descriptor(STRATA_PLUGIN_KIND_QUANT, "test-q8_0-alt", "0.1-test", &kTable))
