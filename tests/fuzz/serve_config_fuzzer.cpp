// libFuzzer target for `strata serve --config` files: any bytes must give settings or end in strata::Error naming
// the file and the key, never crash, hang or throw anything else.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/server/serve_config.hpp"
#include "core/util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    strata::server::parse_serve_config("serve.json", std::string(reinterpret_cast<const char*>(data), size),
                                       {"--port", "0", "--gpu=1"});
  } catch (const strata::Error&) {
  }
  return 0;
}
