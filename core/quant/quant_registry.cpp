#include "core/quant/quant_registry.hpp"

#include <algorithm>
#include <cstddef>

#include "core/gguf/ggml_types.hpp"
#include "core/plugin/abi_call.hpp"
#include "core/util/error.hpp"

namespace strata {
namespace {

std::string type_label(uint32_t type_id) {
  const auto* info = gguf::find_type(type_id);
  return info ? std::string(info->name) : "type " + std::to_string(type_id);
}

// A type from another plugin may be shorter than ours (an older minor): a field past its struct_size is absent.
bool has_codec_fields(const strata_quant_type& type) { return STRATA_HAS_FIELD(&type, quantize); }

// What is wrong with one of a type's repacked layouts (for the GPU, ABI 1.6, or the CPU, 1.9: which names it), or ""
// when it has none or a sound one: a backend converts whole blocks into it and runs its kernels, so it must line up
// with the type.
std::string repacked_layout_problem(const strata_quant_type& type, const strata_quant_type* layout, const void* repack,
                                    const std::string& which) {
  if (layout == nullptr && repack == nullptr) return "";
  const std::string what = type_label(type.type_id) + "'s repacked layout for the " + which;
  if (layout == nullptr || repack == nullptr) return what + " needs both the layout and its repack function";
  if (!has_codec_fields(*layout) || layout->dequantize == nullptr) return what + " is incomplete";
  if (layout->type_id != (type.type_id | STRATA_REPACKED_TYPE_BIT)) {
    return what + " has type id " + std::to_string(layout->type_id) + ", not the type's with STRATA_REPACKED_TYPE_BIT";
  }
  if (layout->block_elements != type.block_elements || layout->block_bytes == 0) {
    return what + " holds " + std::to_string(layout->block_elements) + " values in " +
           std::to_string(layout->block_bytes) + " bytes a block; the type's blocks hold " +
           std::to_string(type.block_elements);
  }
  return "";
}

std::string repacked_layouts_problem(const strata_quant_type& type) {
  std::string problem;
  if (STRATA_HAS_FIELD(&type, cuda_repack)) {
    problem = repacked_layout_problem(type, type.cuda_repacked, reinterpret_cast<const void*>(type.cuda_repack), "GPU");
  }
  if (problem.empty() && STRATA_HAS_FIELD(&type, cpu_repack)) {
    problem = repacked_layout_problem(type, type.cpu_repacked, reinterpret_cast<const void*>(type.cpu_repack), "CPU");
  }
  return problem;
}

}  // namespace

void QuantRegistry::offer(const std::string& provider, const strata_quant_table& table) {
  if (table.types == nullptr && table.type_count > 0) {
    throw Error("quant table of '" + provider + "' has " + std::to_string(table.type_count) + " types but no list");
  }
  // Checks every entry before adding any: a rejected table leaves the registry as it was.
  std::vector<const strata_quant_type*> accepted;
  for (uint32_t i = 0; i < table.type_count; ++i) {
    const strata_quant_type* type = table.types[i];
    if (type == nullptr || !has_codec_fields(*type) || type->dequantize == nullptr) {
      throw Error("quant table of '" + provider + "': entry " + std::to_string(i) + " is incomplete");
    }
    const auto* known = gguf::find_type(type->type_id);
    if (known != nullptr &&
        (known->block_elements != type->block_elements || known->block_bytes != type->block_bytes)) {
      throw Error("quant table of '" + provider + "': " + std::string(known->name) + " declared as " +
                  std::to_string(type->block_elements) + " values in " + std::to_string(type->block_bytes) +
                  " bytes, but GGUF defines " + std::to_string(known->block_elements) + " in " +
                  std::to_string(known->block_bytes));
    }
    if (const std::string problem = repacked_layouts_problem(*type); !problem.empty()) {
      throw Error("quant table of '" + provider + "': " + problem);
    }
    // The offsets complete cpu_rows_to_int8's rows: alone, a backend's int8 kernel would have no levels to add them to.
    if (STRATA_HAS_FIELD(type, cpu_rows_int8_offsets) && type->cpu_rows_int8_offsets != nullptr &&
        type->cpu_rows_to_int8 == nullptr) {
      throw Error("quant table of '" + provider + "': " + type_label(type->type_id) +
                  " offers cpu_rows_int8_offsets without cpu_rows_to_int8");
    }
    accepted.push_back(type);
  }
  for (const auto* type : accepted) offers_[type->type_id].push_back({provider, type});
}

std::vector<std::string> QuantRegistry::resolve(const std::map<std::string, std::vector<std::string>>& preferences) {
  std::vector<std::string> problems;
  chosen_.clear();
  conflicts_.clear();
  for (const auto& [type_id, candidates] : offers_) {
    if (candidates.size() == 1) {
      chosen_[type_id] = candidates.front();
      continue;
    }
    const std::string name = type_label(type_id);
    const auto preference = preferences.find(name);
    bool decided = false;
    if (preference != preferences.end()) {
      for (const auto& wanted : preference->second) {
        const auto hit = std::find_if(candidates.begin(), candidates.end(),
                                      [&](const Offer& offer) { return offer.provider == wanted; });
        if (hit != candidates.end()) {
          chosen_[type_id] = *hit;
          decided = true;
          break;
        }
      }
    }
    if (!decided) {
      std::string names;
      for (const auto& offer : candidates) names += (names.empty() ? "" : ", ") + offer.provider;
      problems.push_back(name + " is offered by " + names + " and the manifest prefers none of them; add \"" + name +
                         "\": [\"" + candidates.front().provider + "\"] (or another of them) to its \"prefer\"");
      conflicts_[type_id] = problems.back();
    }
  }
  return problems;
}

const strata_quant_type* QuantRegistry::find(uint32_t type_id) const {
  const auto hit = chosen_.find(type_id);
  return hit == chosen_.end() ? nullptr : hit->second.type;
}

const strata_quant_type& QuantRegistry::require(uint32_t type_id) const {
  if (const auto* type = find(type_id)) return *type;
  if (const auto conflict = conflicts_.find(type_id); conflict != conflicts_.end()) throw Error(conflict->second);
  throw Error("no plugin decodes tensor type " + type_label(type_id) + " (is its quant plugin loaded?)");
}

std::string QuantRegistry::provider_of(uint32_t type_id) const {
  const auto hit = chosen_.find(type_id);
  return hit == chosen_.end() ? std::string() : hit->second.provider;
}

void QuantRegistry::dequantize(uint32_t type_id, const void* blocks, float* out, int64_t n_elements) const {
  const auto& type = require(type_id);
  if (n_elements % type.block_elements != 0) {
    throw Error(std::string(type.name) + ": " + std::to_string(n_elements) + " values are not whole blocks of " +
                std::to_string(type.block_elements));
  }
  call_plugin("dequantizing " + std::string(type.name) + " (" + provider_of(type_id) + ")", [&](strata_error* error) {
    return type.dequantize(blocks, out, n_elements / type.block_elements, error);
  });
}

void QuantRegistry::quantize(uint32_t type_id, const float* src, void* blocks, int64_t n_rows, int64_t n_per_row,
                             const float* importance) const {
  const auto& type = require(type_id);
  if (type.quantize == nullptr) throw Error(std::string(type.name) + ": " + provider_of(type_id) + " has no quantizer");
  call_plugin("quantizing " + std::string(type.name) + " (" + provider_of(type_id) + ")",
              [&](strata_error* error) { return type.quantize(src, blocks, n_rows, n_per_row, importance, error); });
}

}  // namespace strata
