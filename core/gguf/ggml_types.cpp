#include "core/gguf/ggml_types.hpp"

#include <array>

namespace strata::gguf {
namespace {

// Sizes from the ggml format definitions (ggml-common.h); removed ids (4, 5, 31-33, 36-38) are absent.
constexpr std::array kTypes = {
    TypeInfo{type_id::F32, "F32", 1, 4},
    TypeInfo{type_id::F16, "F16", 1, 2},
    TypeInfo{type_id::Q4_0, "Q4_0", 32, 18},
    TypeInfo{type_id::Q4_1, "Q4_1", 32, 20},
    TypeInfo{type_id::Q5_0, "Q5_0", 32, 22},
    TypeInfo{type_id::Q5_1, "Q5_1", 32, 24},
    TypeInfo{type_id::Q8_0, "Q8_0", 32, 34},
    TypeInfo{type_id::Q8_1, "Q8_1", 32, 36},
    TypeInfo{type_id::Q2_K, "Q2_K", 256, 84},
    TypeInfo{type_id::Q3_K, "Q3_K", 256, 110},
    TypeInfo{type_id::Q4_K, "Q4_K", 256, 144},
    TypeInfo{type_id::Q5_K, "Q5_K", 256, 176},
    TypeInfo{type_id::Q6_K, "Q6_K", 256, 210},
    TypeInfo{type_id::Q8_K, "Q8_K", 256, 292},
    TypeInfo{type_id::IQ2_XXS, "IQ2_XXS", 256, 66},
    TypeInfo{type_id::IQ2_XS, "IQ2_XS", 256, 74},
    TypeInfo{type_id::IQ3_XXS, "IQ3_XXS", 256, 98},
    TypeInfo{type_id::IQ1_S, "IQ1_S", 256, 50},
    TypeInfo{type_id::IQ4_NL, "IQ4_NL", 32, 18},
    TypeInfo{type_id::IQ3_S, "IQ3_S", 256, 110},
    TypeInfo{type_id::IQ2_S, "IQ2_S", 256, 82},
    TypeInfo{type_id::IQ4_XS, "IQ4_XS", 256, 136},
    TypeInfo{type_id::I8, "I8", 1, 1},
    TypeInfo{type_id::I16, "I16", 1, 2},
    TypeInfo{type_id::I32, "I32", 1, 4},
    TypeInfo{type_id::I64, "I64", 1, 8},
    TypeInfo{type_id::F64, "F64", 1, 8},
    TypeInfo{type_id::IQ1_M, "IQ1_M", 256, 56},
    TypeInfo{type_id::BF16, "BF16", 1, 2},
    TypeInfo{type_id::TQ1_0, "TQ1_0", 256, 54},
    TypeInfo{type_id::TQ2_0, "TQ2_0", 256, 66},
    TypeInfo{type_id::MXFP4, "MXFP4", 32, 17},
};

}  // namespace

std::span<const TypeInfo> all_types() { return kTypes; }

const TypeInfo* find_type(uint32_t id) {
  for (const auto& type : kTypes) {
    if (type.id == id) return &type;
  }
  return nullptr;
}

const TypeInfo* find_type(std::string_view name) {
  for (const auto& type : kTypes) {
    if (type.name == name) return &type;
  }
  return nullptr;
}

}  // namespace strata::gguf
