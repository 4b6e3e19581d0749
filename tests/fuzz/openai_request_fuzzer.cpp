// libFuzzer target for the OpenAI request bodies `strata serve` reads: any bytes must parse or end in
// RequestError (the server's 400, naming the field), never crash, hang or throw anything else. The first byte
// picks the endpoint.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/server/openai_request.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      strata::server::parse_chat_request(body);
    } else {
      strata::server::parse_completion_request(body);
    }
  } catch (const strata::server::RequestError&) {
  }
  return 0;
}
