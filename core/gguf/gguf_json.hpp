// GGUF metadata as JSON, for `strata inspect --json` and for tools that read metadata generically.
#pragma once

#include <nlohmann/json.hpp>

#include "core/gguf/gguf_file.hpp"

namespace strata::gguf {

nlohmann::json to_json(const Value& value);
// Short human form: scalars in full, long arrays and strings abbreviated.
std::string to_display(const Value& value, size_t max_items = 8);

}  // namespace strata::gguf
