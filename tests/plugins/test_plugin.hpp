// What the misbehaving test plugins share: a well-formed descriptor of a quant plugin with no types,
// which each plugin then bends in exactly one way.
#pragma once

#include <cstdint>

#include "strata/plugin.hpp"

namespace test_plugin {

inline const strata_quant_table kNoTypes = {sizeof(strata_quant_table), 0, nullptr};

inline strata_plugin_descriptor descriptor(const char* name, strata::sdk::DescriptorHooks hooks = {}) {
  return strata::sdk::make_descriptor(STRATA_PLUGIN_KIND_QUANT, name, "0.1-test", &kNoTypes, hooks);
}

inline strata_plugin_descriptor with_abi(strata_plugin_descriptor bent, uint16_t major, uint16_t minor) {
  bent.abi_major = major;
  bent.abi_minor = minor;
  return bent;
}

}  // namespace test_plugin
