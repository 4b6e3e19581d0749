// Copies of a GGUF model with some things changed, for the tests of bad models: metadata replaced or
// removed, a tensor's bytes patched, a tensor given another type (its data then zeros of the new size).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.hpp"

namespace strata::test {

struct ModelChanges {
  std::map<std::string, std::optional<gguf::Value>> metadata;  // a key's new value; nullopt removes the key
  std::map<std::string, uint32_t> types;                       // tensor name -> its new GGUF type id
  // Called with every tensor's bytes before they are written; may change them.
  std::function<void(const gguf::TensorInfo& tensor, std::vector<uint8_t>& bytes)> patch;
};

void write_model_copy(const gguf::Model& model, const std::filesystem::path& path, const ModelChanges& changes);

// Patches value `index` of an F32 tensor's bytes.
void set_f32(std::vector<uint8_t>& bytes, uint64_t index, float value);

}  // namespace strata::test
