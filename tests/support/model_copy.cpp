#include "support/model_copy.hpp"

#include <cstring>

#include "core/gguf/ggml_types.hpp"
#include "core/gguf/gguf_writer.hpp"

namespace strata::test {

void write_model_copy(const gguf::Model& model, const std::filesystem::path& path, const ModelChanges& changes) {
  gguf::Writer writer(model.first().alignment());
  for (const auto& [key, value] : model.metadata()) {
    if (key == "general.alignment" || changes.metadata.contains(key)) continue;
    writer.set(key, value);
  }
  for (const auto& [key, value] : changes.metadata) {
    if (value) writer.set(key, *value);
  }
  std::vector<std::vector<uint8_t>> data;
  for (const auto& tensor : model.tensors()) {
    const auto retyped = changes.types.find(tensor.name);
    if (retyped == changes.types.end()) {
      writer.add_tensor(tensor.name, tensor.type, tensor.shape);
      data.emplace_back(tensor.data, tensor.data + tensor.bytes);
    } else {
      const gguf::TypeInfo* type = gguf::find_type(retyped->second);
      writer.add_tensor(tensor.name, type->id, tensor.shape);
      data.emplace_back(tensor.n_elements / type->block_elements * type->block_bytes, 0);
    }
    if (changes.patch) changes.patch(tensor, data.back());
  }
  writer.open(path);
  for (const auto& bytes : data) writer.write_tensor(bytes.data(), bytes.size());
  writer.finish();
}

void set_f32(std::vector<uint8_t>& bytes, uint64_t index, float value) {
  std::memcpy(bytes.data() + index * sizeof(float), &value, sizeof(float));
}

}  // namespace strata::test
