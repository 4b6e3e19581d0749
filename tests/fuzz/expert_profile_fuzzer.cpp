// libFuzzer target for expert profiles: any text must read as a profile or end in strata::Error (naming the
// file), never crash or hang, both for a model of a given shape and taking the file's own.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/experts/expert_profile.hpp"
#include "core/util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& [n_layer, n_expert] : {std::pair{2, 8}, std::pair{0, 0}}) {
    try {
      const strata::ExpertProfile profile = strata::parse_expert_profile(text, "/fuzz/profile.json", n_layer, n_expert);
      // What was read writes back and reads again the same.
      const auto again = strata::parse_expert_profile(strata::format_expert_profile(profile.counts, profile.info),
                                                      "/fuzz/again.json", n_layer, n_expert);
      if (again.counts.total() != profile.counts.total()) __builtin_trap();
    } catch (const strata::Error&) {
    }
  }
  return 0;
}
