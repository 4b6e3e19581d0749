#include "core/server/worker_protocol.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/util/error.hpp"

namespace strata {
// In SamplingParams' namespace, where nlohmann's lookup finds it.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SamplingParams, temperature, top_k, top_p, min_p, repetition_penalty,
                                   presence_penalty, frequency_penalty, repeat_last_n, seed)
}  // namespace strata

namespace strata::server {
namespace {

using Json = nlohmann::json;

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(std::string("the engine worker's channel is closed (") + std::strerror(errno) + ")");
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// Reads size bytes; false at the end of the stream before the first byte.
bool read_all(int fd, char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::recv(fd, data + done, size - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 && done == 0) return false;
    if (n <= 0) throw Error("the engine worker's channel broke mid-frame");
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

void write_frame(int fd, const Json& message) {
  const std::string body = message.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (body.size() > kMaxFrameBytes) throw Error("a frame for the engine worker is larger than 64 MiB");
  const auto size = static_cast<uint32_t>(body.size());
  const char header[4] = {static_cast<char>(size & 0xff), static_cast<char>(size >> 8 & 0xff),
                          static_cast<char>(size >> 16 & 0xff), static_cast<char>(size >> 24 & 0xff)};
  std::string frame(header, 4);
  frame += body;
  write_all(fd, frame.data(), frame.size());
}

std::optional<Json> read_frame(int fd) {
  unsigned char header[4];
  if (!read_all(fd, reinterpret_cast<char*>(header), 4)) return std::nullopt;
  const uint32_t size = header[0] | header[1] << 8 | header[2] << 16 | static_cast<uint32_t>(header[3]) << 24;
  if (size > kMaxFrameBytes) throw Error("a frame from the engine worker claims " + std::to_string(size) + " bytes");
  std::string body(size, '\0');
  if (size > 0 && !read_all(fd, body.data(), size)) throw Error("the engine worker's channel broke mid-frame");
  Json message = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded() || !message.is_object() || message.size() != 1) {
    throw Error("a frame on the engine worker's channel is no message");
  }
  return message;
}

Json request_to_json(const CompletionRequest& request) {
  Json json{{"chat", request.chat},     {"messages", request.messages}, {"tools", request.tools},
            {"prompt", request.prompt}, {"stop", request.stop},         {"sampling", request.sampling},
            {"seeded", request.seeded}};
  json["max_tokens"] = request.max_tokens ? Json(*request.max_tokens) : Json(nullptr);
  return json;
}

CompletionRequest request_from_json(const Json& json) {
  CompletionRequest request;
  request.chat = json.at("chat").get<bool>();
  request.messages = nlohmann::ordered_json::parse(json.at("messages").dump());
  request.tools = nlohmann::ordered_json::parse(json.at("tools").dump());
  request.prompt = json.at("prompt").get<std::string>();
  request.stop = json.at("stop").get<std::vector<std::string>>();
  if (!json.at("max_tokens").is_null()) request.max_tokens = json.at("max_tokens").get<int32_t>();
  request.sampling = json.at("sampling").get<SamplingParams>();
  request.seeded = json.at("seeded").get<bool>();
  return request;
}

}  // namespace strata::server
