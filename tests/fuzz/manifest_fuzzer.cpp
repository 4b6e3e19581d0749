// libFuzzer target for the plugin manifest: any text must validate or end in strata::Error (naming the
// manifest), never crash or hang.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/plugin/manifest.hpp"
#include "core/util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    strata::parse_manifest(std::string_view(reinterpret_cast<const char*>(data), size), "/fuzz/strata-manifest.json");
  } catch (const strata::Error&) {
  }
  return 0;
}
