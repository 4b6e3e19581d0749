// GGUF reader: versions 2 and 3, memory-mapped, every metadata value type (arrays nest), alignment,
// tensor bounds, and split models (NAME-00001-of-0000N.gguf opens every part).
//
// Every malformed input ends in strata::Error naming the file and what is wrong. The parser never
// allocates more than the file size justifies: each count is checked against the bytes left before
// anything is reserved.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace strata::gguf {

// Metadata value types, numbered as in the file.
enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
const char* value_type_name(ValueType type);

struct Value;
struct Array {
  ValueType element_type = ValueType::U8;
  std::vector<Value> items;
};

// The variant's index is the ValueType's number.
struct Value {
  std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool, std::string, Array, uint64_t,
               int64_t, double>
      data;
  ValueType type() const { return static_cast<ValueType>(data.index()); }

  // Checked conversions; nullopt when the value is not of a compatible kind (or out of range).
  std::optional<uint64_t> as_uint() const;
  std::optional<int64_t> as_int() const;
  std::optional<double> as_float() const;  // any numeric type
  const std::string* as_string() const;
  const Array* as_array() const;
};

struct TensorInfo {
  std::string name;
  uint32_t type = 0;            // GGUF type id (see ggml_types.hpp)
  std::vector<uint64_t> shape;  // GGUF order: ne0 (the contiguous dimension) first
  uint64_t n_elements = 0;
  uint64_t bytes = 0;
  uint64_t offset = 0;            // from the start of its file's data section
  const uint8_t* data = nullptr;  // into the mapping of the file that holds it
  uint32_t file_index = 0;        // which part of a split model
};

// One mapped GGUF file.
class File {
 public:
  // Maps and parses path; throws strata::Error on any problem.
  static std::shared_ptr<const File> open(const std::filesystem::path& path);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::filesystem::path& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // where the tensor data section starts
  uint64_t size() const { return size_; }
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
  const Value* find(const std::string& key) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  // Parses an in-memory image (for tests and the fuzzer); name labels errors. The bytes must outlive it.
  static std::shared_ptr<const File> parse(const uint8_t* bytes, uint64_t size, const std::string& name);

 private:
  File() = default;
  void parse_image();

  std::filesystem::path path_;
  const uint8_t* bytes_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;  // non-null when this object owns an mmap
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::map<std::string, size_t, std::less<>> index_;
  std::vector<TensorInfo> tensors_;
};

// A model: one file, or every part of a split model. Metadata comes from the first part; tensors from all.
class Model {
 public:
  // Opens path; when its name is NAME-0000K-of-0000N.gguf (or its split.count says so) opens all N parts.
  explicit Model(const std::filesystem::path& path);

  const std::vector<std::shared_ptr<const File>>& files() const { return files_; }
  const File& first() const { return *files_.front(); }
  const std::vector<std::pair<std::string, Value>>& metadata() const { return first().metadata(); }
  const Value* find(const std::string& key) const { return first().find(key); }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // The bytes of all tensors of all parts: the weights a backend holds for the whole model.
  uint64_t tensor_bytes() const;
  const TensorInfo* find_tensor(const std::string& name) const;
  // Like find_tensor, but throws strata::Error naming the model and the tensor.
  const TensorInfo& tensor(const std::string& name) const;

 private:
  std::vector<std::shared_ptr<const File>> files_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace strata::gguf
