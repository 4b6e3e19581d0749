// What the misbehaving test plugins share: a well-formed descriptor of a quant plugin with no types,
// which each plugin then bends in exactly one way.
#pragma once

#include <cstdint>

#include "strata/plugin.hpp"

namespace test_plugin {

// A quant type that only decodes: no quantizer (the ABI allows that) and no kernels.
constexpr strata_quant_type decode_only_type(uint32_t type_id, const char* name, uint32_t block_elements,
                                             uint32_t block_bytes, decltype(strata_quant_type::dequantize) dequantize) {
  return strata::sdk::quant_type_without_kernels(type_id, name, block_elements, block_bytes, dequantize, nullptr);
}

inline const strata_quant_table kNoTypes = {
    .struct_size = sizeof(strata_quant_table), .type_count = 0, .types = nullptr};

inline strata_plugin_descriptor descriptor(const char* name, strata::sdk::DescriptorHooks hooks = {}) {
  return strata::sdk::make_descriptor(STRATA_PLUGIN_KIND_QUANT, name, "0.1-test", &kNoTypes, hooks);
}

inline strata_plugin_descriptor with_abi(strata_plugin_descriptor bent, uint16_t major, uint16_t minor) {
  bent.abi_major = major;
  bent.abi_minor = minor;
  return bent;
}

}  // namespace test_plugin
