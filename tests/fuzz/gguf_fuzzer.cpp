// libFuzzer target for the GGUF parser: any input must parse or end in strata::Error, never crash, hang
// or allocate beyond what its size justifies (run with -rss_limit_mb).
#include <cstddef>
#include <cstdint>

#include "core/gguf/gguf_file.hpp"
#include "core/util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto file = strata::gguf::File::parse(data, size, "fuzz.gguf");
    // Touch every tensor's first and last byte: bounds must have been checked.
    volatile uint8_t sink = 0;
    for (const auto& tensor : file->tensors()) {
      if (tensor.bytes > 0) sink = sink + tensor.data[0] + tensor.data[tensor.bytes - 1];
    }
  } catch (const strata::Error&) {
  }
  return 0;
}
