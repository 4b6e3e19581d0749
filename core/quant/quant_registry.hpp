// Which provider decodes and encodes each GGUF tensor type. The core registers its base types (F32, F16,
// BF16, Q8_0) under the provider name "core"; quant plugins add theirs. When two providers offer one type
// the manifest's preference decides; without one the type is left unresolved and reported.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "strata/quant.h"

namespace strata {

class QuantRegistry {
 public:
  // Offers every type of table on behalf of provider (a plugin name, or "core").
  void offer(const std::string& provider, const strata_quant_table& table);

  // Picks one provider per type. preferences maps a type name to provider names, best first. Returns one
  // message per type that could not be decided (several providers, no preference names one of them).
  std::vector<std::string> resolve(const std::map<std::string, std::vector<std::string>>& preferences);

  // The chosen type for a GGUF type id, or nullptr.
  const strata_quant_type* find(uint32_t type_id) const;
  // Like find, but throws strata::Error naming the type when nothing provides it, or the conflict resolve()
  // reported when several do (their names and the manifest's "prefer" entry that settles it).
  const strata_quant_type& require(uint32_t type_id) const;
  std::string provider_of(uint32_t type_id) const;

  struct Offer {
    std::string provider;
    const strata_quant_type* type;
  };
  // Every offer per type id, chosen or not (for `strata plugins`).
  const std::map<uint32_t, std::vector<Offer>>& offers() const { return offers_; }

  // Convenience wrappers that turn a plugin's failure into strata::Error.
  void dequantize(uint32_t type_id, const void* blocks, float* out, int64_t n_elements) const;
  void quantize(uint32_t type_id, const float* src, void* blocks, int64_t n_rows, int64_t n_per_row,
                const float* importance = nullptr) const;

 private:
  std::map<uint32_t, std::vector<Offer>> offers_;
  std::map<uint32_t, Offer> chosen_;
  std::map<uint32_t, std::string> conflicts_;  // resolve()'s message for each type it could not decide
};

// The core's own table: F32, F16, BF16, Q8_0, and Q8_K (the CPU's activation format for k-quant and IQ dots).
const strata_quant_table& base_quant_table();

}  // namespace strata
