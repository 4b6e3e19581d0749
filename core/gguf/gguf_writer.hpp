// GGUF v3 writer. Streams: the header is written first, then each tensor's data in the order the tensors
// were declared, so a model larger than memory (a synthetic 30B model) is written one tensor at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.hpp"

namespace strata::gguf {

class Writer {
 public:
  explicit Writer(uint64_t alignment = 32) : alignment_(alignment) {}

  void set(const std::string& key, Value value);
  // Declares a tensor; shape in GGUF order (ne0 first). Its data is written later by write_tensor().
  void add_tensor(const std::string& name, uint32_t type, std::vector<uint64_t> shape);

  // Writes the header to path; then call write_tensor() once per declared tensor, in order, then finish().
  void open(const std::filesystem::path& path);
  void write_tensor(const void* data, uint64_t bytes);
  void finish();

  // The whole file in memory, for small files and tests: tensor_data holds each tensor's bytes in order.
  std::vector<uint8_t> to_bytes(const std::vector<std::vector<uint8_t>>& tensor_data) const;

 private:
  struct Declared {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> shape;
    uint64_t bytes;
    uint64_t offset;
  };
  std::vector<uint8_t> header() const;

  uint64_t alignment_;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<Declared> tensors_;
  uint64_t data_size_ = 0;
  std::filesystem::path path_;
  std::ofstream out_;
  size_t next_tensor_ = 0;
};

}  // namespace strata::gguf
