#include "core/model/architecture.hpp"

#include <array>

namespace strata {
namespace {

constexpr std::array kArchitectures = {
    Architecture{"qwen3moe", /*qk_norm=*/true, /*qkv_bias=*/false, /*shared_expert=*/false,
                 STRATA_ROUTING_SOFTMAX_TOPK_NORM},
    Architecture{"qwen2moe", /*qk_norm=*/false, /*qkv_bias=*/true, /*shared_expert=*/true, STRATA_ROUTING_SOFTMAX_TOPK},
};

}  // namespace

const Architecture* find_architecture(std::string_view name) {
  for (const auto& architecture : kArchitectures) {
    if (architecture.name == name) return &architecture;
  }
  return nullptr;
}

std::string_view known_architectures() { return "qwen3moe, qwen2moe"; }

}  // namespace strata
