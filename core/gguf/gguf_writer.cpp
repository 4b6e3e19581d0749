#include "core/gguf/gguf_writer.hpp"

#include <cstring>

#include "core/gguf/ggml_types.hpp"
#include "core/util/error.hpp"

namespace strata::gguf {
namespace {

uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

class ByteSink {
 public:
  explicit ByteSink(std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  template <class T>
  void put(T value) {
    const auto* raw = reinterpret_cast<const uint8_t*>(&value);
    bytes_.insert(bytes_.end(), raw, raw + sizeof(T));
  }
  void put_string(const std::string& text) {
    put<uint64_t>(text.size());
    bytes_.insert(bytes_.end(), text.begin(), text.end());
  }
  void put_value(const Value& value) {
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            put_string(v);
          } else if constexpr (std::is_same_v<T, Array>) {
            put<uint32_t>(static_cast<uint32_t>(v.element_type));
            put<uint64_t>(v.items.size());
            for (const auto& item : v.items) {
              if (item.type() != v.element_type)
                throw Error("GGUF writer: array items must all be of the element type");
              put_value(item);
            }
          } else if constexpr (std::is_same_v<T, bool>) {
            put<uint8_t>(v ? 1 : 0);
          } else {
            put<T>(v);
          }
        },
        value.data);
  }

 private:
  std::vector<uint8_t>& bytes_;
};

}  // namespace

void Writer::set(const std::string& key, Value value) {
  for (auto& [existing, stored] : metadata_) {
    if (existing == key) {
      stored = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void Writer::add_tensor(const std::string& name, uint32_t type, std::vector<uint64_t> shape) {
  const TypeInfo* info = find_type(type);
  if (info == nullptr) throw Error("GGUF writer: tensor '" + name + "' has unknown type " + std::to_string(type));
  if (shape.empty() || shape[0] % info->block_elements != 0) {
    throw Error("GGUF writer: tensor '" + name + "' rows are not whole " + std::string(info->name) + " blocks");
  }
  uint64_t elements = 1;
  for (const uint64_t dim : shape) elements *= dim;
  const uint64_t bytes = elements / info->block_elements * info->block_bytes;
  tensors_.push_back({name, type, std::move(shape), bytes, data_size_});
  data_size_ = align_up(data_size_ + bytes, alignment_);
}

std::vector<uint8_t> Writer::header() const {
  std::vector<uint8_t> bytes;
  ByteSink sink(bytes);
  sink.put<uint32_t>(0x46554747);  // "GGUF"
  sink.put<uint32_t>(3);
  sink.put<uint64_t>(tensors_.size());
  const bool needs_alignment_key = alignment_ != 32;
  sink.put<uint64_t>(metadata_.size() + (needs_alignment_key ? 1 : 0));
  if (needs_alignment_key) {
    sink.put_string("general.alignment");
    sink.put<uint32_t>(static_cast<uint32_t>(ValueType::U32));
    sink.put<uint32_t>(static_cast<uint32_t>(alignment_));
  }
  for (const auto& [key, value] : metadata_) {
    sink.put_string(key);
    sink.put<uint32_t>(static_cast<uint32_t>(value.type()));
    sink.put_value(value);
  }
  for (const auto& tensor : tensors_) {
    sink.put_string(tensor.name);
    sink.put<uint32_t>(static_cast<uint32_t>(tensor.shape.size()));
    for (const uint64_t dim : tensor.shape) sink.put<uint64_t>(dim);
    sink.put<uint32_t>(tensor.type);
    sink.put<uint64_t>(tensor.offset);
  }
  bytes.resize(align_up(bytes.size(), alignment_), 0);
  return bytes;
}

void Writer::open(const std::filesystem::path& path) {
  path_ = path;
  out_.open(path, std::ios::binary | std::ios::trunc);
  if (!out_) throw Error(path.string() + ": cannot create");
  const auto bytes = header();
  out_.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  next_tensor_ = 0;
}

void Writer::write_tensor(const void* data, uint64_t bytes) {
  if (next_tensor_ >= tensors_.size()) throw Error(path_.string() + ": more tensor data than declared tensors");
  const Declared& tensor = tensors_[next_tensor_++];
  if (bytes != tensor.bytes) {
    throw Error(path_.string() + ": tensor '" + tensor.name + "' needs " + std::to_string(tensor.bytes) +
                " bytes, got " + std::to_string(bytes));
  }
  out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  static const std::vector<char> padding(4096, 0);
  uint64_t pad = align_up(bytes, alignment_) - bytes;
  while (pad > 0) {
    const uint64_t chunk = std::min<uint64_t>(pad, padding.size());
    out_.write(padding.data(), static_cast<std::streamsize>(chunk));
    pad -= chunk;
  }
  if (!out_) throw Error(path_.string() + ": write failed (disk full?)");
}

void Writer::finish() {
  if (next_tensor_ != tensors_.size()) {
    throw Error(path_.string() + ": " + std::to_string(tensors_.size() - next_tensor_) +
                " declared tensors were not written");
  }
  out_.close();
  if (!out_) throw Error(path_.string() + ": write failed");
}

std::vector<uint8_t> Writer::to_bytes(const std::vector<std::vector<uint8_t>>& tensor_data) const {
  if (tensor_data.size() != tensors_.size())
    throw Error("GGUF writer: tensor data count does not match the declared tensors");
  std::vector<uint8_t> bytes = header();
  const uint64_t data_start = bytes.size();
  bytes.resize(data_start + data_size_, 0);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensor_data[i].size() != tensors_[i].bytes)
      throw Error("GGUF writer: tensor '" + tensors_[i].name + "' has the wrong size");
    std::memcpy(bytes.data() + data_start + tensors_[i].offset, tensor_data[i].data(), tensor_data[i].size());
  }
  return bytes;
}

}  // namespace strata::gguf
