// Calls across the plugin boundary: a status code plus a message buffer come back, and the core turns a
// failure into a strata::Error that names what was being done.
#pragma once

#include <array>
#include <string>

#include "core/util/error.hpp"
#include "strata/plugin.h"

namespace strata {

std::string status_name(strata_status status);

// Runs call(strata_error*) and throws strata::Error("<what>: <status>: <plugin's message>") on failure.
template <class Call>
void call_plugin(const std::string& what, Call&& call) {
  std::array<char, 1024> buffer{};
  strata_error error{buffer.data(), buffer.size()};
  const strata_status status = call(&error);
  if (status != STRATA_OK) {
    buffer.back() = '\0';  // a plugin that ignores capacity still cannot make us read past the buffer
    throw Error(what + ": " + status_name(status) + (buffer[0] ? ": " + std::string(buffer.data()) : ""));
  }
}

}  // namespace strata
