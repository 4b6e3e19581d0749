#include "core/gguf/gguf_file.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <regex>

#include "core/gguf/ggml_types.hpp"
#include "core/util/error.hpp"
#include "core/util/user_file.hpp"

namespace strata::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int kMaxArrayDepth = 8;        // real files nest at most once; deeper is an attack on the stack
constexpr uint32_t kMaxDims = 4;         // ggml's GGML_MAX_DIMS
// Bounds element counts so that products and byte sizes cannot overflow 64 bits.
constexpr uint64_t kMaxElements = uint64_t{1} << 60;
constexpr size_t kMaxTensorName = 63;  // ggml keeps names in 64-byte fields

// Keys are ASCII by the GGUF specification; a damaged key shows up here first.
bool is_valid_key(const std::string& key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

// Smallest encoding of one value of each type, used to reject counts the remaining bytes cannot hold
// before anything is allocated.
uint64_t min_encoded_size(ValueType type) {
  switch (type) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL:
      return 1;
    case ValueType::U16:
    case ValueType::I16:
      return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32:
      return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
      return 8;
    case ValueType::STRING:
      return 8;  // the length
    case ValueType::ARRAY:
      return 12;  // element type + count
  }
  return 1;
}

bool is_known_value_type(uint32_t raw) { return raw <= static_cast<uint32_t>(ValueType::F64); }

// Reads little-endian fields from the mapped image; every read is bounds-checked and a failure names the
// file, what was being read and where.
class Cursor {
 public:
  Cursor(const uint8_t* bytes, uint64_t size, const std::string& name) : bytes_(bytes), size_(size), name_(name) {}

  uint64_t position() const { return position_; }
  uint64_t remaining() const { return size_ - position_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(name_ + ": " + what + " (at byte " + std::to_string(position_) + ")");
  }

  template <class T>
  T read(const char* what) {
    if (remaining() < sizeof(T)) fail(std::string("truncated file: ") + what + " runs past the end");
    T value;
    std::memcpy(&value, bytes_ + position_, sizeof(T));
    position_ += sizeof(T);
    return value;
  }

  std::string read_string(const char* what) {
    const uint64_t length = read<uint64_t>(what);
    if (length > remaining()) {
      fail(std::string(what) + " claims " + std::to_string(length) + " bytes but only " + std::to_string(remaining()) +
           " remain");
    }
    std::string text(reinterpret_cast<const char*>(bytes_ + position_), length);
    position_ += length;
    return text;
  }

  // Fails unless count items of at least item_size bytes each can fit in what is left.
  void check_count(uint64_t count, uint64_t item_size, const std::string& what) const {
    if (count > remaining() / item_size) {
      fail(what + " count " + std::to_string(count) + " cannot fit in the " + std::to_string(remaining()) +
           " bytes that remain");
    }
  }

 private:
  const uint8_t* bytes_;
  uint64_t size_;
  uint64_t position_ = 0;
  const std::string& name_;
};

Value read_value(Cursor& cursor, ValueType type, int depth, const std::string& key);

Array read_array(Cursor& cursor, int depth, const std::string& key) {
  if (depth >= kMaxArrayDepth)
    cursor.fail("metadata '" + key + "': arrays nested deeper than " + std::to_string(kMaxArrayDepth));
  const uint32_t raw_type = cursor.read<uint32_t>("array element type");
  if (!is_known_value_type(raw_type)) {
    cursor.fail("metadata '" + key + "': unknown array element type " + std::to_string(raw_type));
  }
  Array array;
  array.element_type = static_cast<ValueType>(raw_type);
  const uint64_t count = cursor.read<uint64_t>("array length");
  cursor.check_count(count, min_encoded_size(array.element_type), "metadata '" + key + "': array");
  array.items.reserve(count);
  for (uint64_t i = 0; i < count; ++i) array.items.push_back(read_value(cursor, array.element_type, depth + 1, key));
  return array;
}

Value read_value(Cursor& cursor, ValueType type, int depth, const std::string& key) {
  Value value;
  switch (type) {
    case ValueType::U8:
      value.data.emplace<uint8_t>(cursor.read<uint8_t>("u8 value"));
      break;
    case ValueType::I8:
      value.data.emplace<int8_t>(cursor.read<int8_t>("i8 value"));
      break;
    case ValueType::U16:
      value.data.emplace<uint16_t>(cursor.read<uint16_t>("u16 value"));
      break;
    case ValueType::I16:
      value.data.emplace<int16_t>(cursor.read<int16_t>("i16 value"));
      break;
    case ValueType::U32:
      value.data.emplace<uint32_t>(cursor.read<uint32_t>("u32 value"));
      break;
    case ValueType::I32:
      value.data.emplace<int32_t>(cursor.read<int32_t>("i32 value"));
      break;
    case ValueType::F32:
      value.data.emplace<float>(cursor.read<float>("f32 value"));
      break;
    case ValueType::BOOL:
      value.data.emplace<bool>(cursor.read<uint8_t>("bool value") != 0);
      break;
    case ValueType::STRING:
      value.data.emplace<std::string>(cursor.read_string("string value"));
      break;
    case ValueType::ARRAY:
      value.data.emplace<Array>(read_array(cursor, depth, key));
      break;
    case ValueType::U64:
      value.data.emplace<uint64_t>(cursor.read<uint64_t>("u64 value"));
      break;
    case ValueType::I64:
      value.data.emplace<int64_t>(cursor.read<int64_t>("i64 value"));
      break;
    case ValueType::F64:
      value.data.emplace<double>(cursor.read<double>("f64 value"));
      break;
  }
  return value;
}

uint64_t checked_product(const std::vector<uint64_t>& dims, const Cursor& cursor, const std::string& tensor) {
  uint64_t product = 1;
  for (const uint64_t dim : dims) {
    if (dim == 0) cursor.fail("tensor '" + tensor + "' has a zero dimension");
    if (dim > kMaxElements / product) cursor.fail("tensor '" + tensor + "' dimensions are implausibly large");
    product *= dim;
  }
  return product;
}

struct SplitName {
  std::string prefix;
  int index = 0;  // 1-based
  int count = 0;
};

std::optional<SplitName> parse_split_name(const std::filesystem::path& path) {
  static const std::regex pattern(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");
  std::smatch match;
  const std::string name = path.filename().string();
  if (!std::regex_match(name, match, pattern)) return std::nullopt;
  return SplitName{match[1].str(), std::stoi(match[2].str()), std::stoi(match[3].str())};
}

std::filesystem::path split_part_path(const std::filesystem::path& any_part, const SplitName& split, int index) {
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "-%05d-of-%05d.gguf", index, split.count);
  return any_part.parent_path() / (split.prefix + suffix);
}

}  // namespace

const char* value_type_name(ValueType type) {
  static constexpr const char* kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                           "bool", "string", "array", "u64", "i64", "f64"};
  return kNames[static_cast<uint32_t>(type)];
}

std::optional<uint64_t> Value::as_uint() const {
  return std::visit(
      [](const auto& v) -> std::optional<uint64_t> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          if constexpr (std::is_signed_v<T>) {
            if (v < 0) return std::nullopt;
          }
          return static_cast<uint64_t>(v);
        } else {
          return std::nullopt;
        }
      },
      data);
}

std::optional<int64_t> Value::as_int() const {
  return std::visit(
      [](const auto& v) -> std::optional<int64_t> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          if constexpr (std::is_same_v<T, uint64_t>) {
            if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
          }
          return static_cast<int64_t>(v);
        } else {
          return std::nullopt;
        }
      },
      data);
}

std::optional<double> Value::as_float() const {
  return std::visit(
      [](const auto& v) -> std::optional<double> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
          return static_cast<double>(v);
        } else {
          return std::nullopt;
        }
      },
      data);
}

const std::string* Value::as_string() const { return std::get_if<std::string>(&data); }
const Array* Value::as_array() const { return std::get_if<Array>(&data); }

std::shared_ptr<const File> File::open(const std::filesystem::path& path) {
  const std::string name = path.string();
  uint64_t size = 0;
  void* mapping = nullptr;
  {
    const RegularFile opened = open_regular_file(path, "the GGUF file");  // a FIFO or device is refused unopened
    size = opened.size;
    if (size == 0) throw Error(name + ": empty file, not a GGUF model");
    mapping = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, opened.fd.get(), 0);
    if (mapping == MAP_FAILED) throw Error(name + ": cannot map: " + std::strerror(errno));
  }  // the mapping keeps the file alive

  std::shared_ptr<File> file(new File());
  file->path_ = path;
  file->mapping_ = mapping;
  file->bytes_ = static_cast<const uint8_t*>(mapping);
  file->size_ = size;
  file->parse_image();
  return file;
}

std::shared_ptr<const File> File::parse(const uint8_t* bytes, uint64_t size, const std::string& name) {
  std::shared_ptr<File> file(new File());
  file->path_ = name;
  file->bytes_ = bytes;
  file->size_ = size;
  file->parse_image();
  return file;
}

File::~File() {
  if (mapping_ != nullptr) ::munmap(mapping_, static_cast<size_t>(size_));
}

void File::parse_image() {
  const std::string name = path_.string();
  Cursor cursor(bytes_, size_, name);

  const uint32_t magic = cursor.read<uint32_t>("magic");
  if (magic != kMagic) cursor.fail("not a GGUF file (bad magic)");
  version_ = cursor.read<uint32_t>("version");
  if (version_ == 1) cursor.fail("GGUF version 1 is not supported (only 2 and 3); re-convert the model");
  if (version_ == 0x03000000u || version_ == 0x02000000u) cursor.fail("big-endian GGUF is not supported");
  if (version_ != 2 && version_ != 3)
    cursor.fail("unsupported GGUF version " + std::to_string(version_) + " (only 2 and 3)");

  const uint64_t tensor_count = cursor.read<uint64_t>("tensor count");
  const uint64_t kv_count = cursor.read<uint64_t>("metadata count");
  // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info 8 + 4 + 8 + 4 + 8.
  cursor.check_count(kv_count, 13, "metadata");
  cursor.check_count(tensor_count, 32, "tensor");

  metadata_.reserve(kv_count);
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key = cursor.read_string("metadata key");
    if (!is_valid_key(key))
      cursor.fail("metadata key " + std::to_string(i) + " is not printable ASCII (damaged file?)");
    const uint32_t raw_type = cursor.read<uint32_t>("metadata value type");
    if (!is_known_value_type(raw_type)) {
      cursor.fail("metadata '" + key + "' has unknown value type " + std::to_string(raw_type));
    }
    if (index_.contains(key)) cursor.fail("metadata key '" + key + "' appears twice");
    Value value = read_value(cursor, static_cast<ValueType>(raw_type), 0, key);
    index_.emplace(key, metadata_.size());
    metadata_.emplace_back(std::move(key), std::move(value));
  }

  if (const Value* alignment = find("general.alignment")) {
    const auto* raw = std::get_if<uint32_t>(&alignment->data);
    if (raw == nullptr)
      cursor.fail("general.alignment must be a u32, found " + std::string(value_type_name(alignment->type())));
    if (*raw == 0 || (*raw & (*raw - 1)) != 0)
      cursor.fail("general.alignment " + std::to_string(*raw) + " is not a power of two");
    alignment_ = *raw;
  }

  tensors_.reserve(tensor_count);
  std::map<std::string, size_t, std::less<>> tensor_names;
  for (uint64_t i = 0; i < tensor_count; ++i) {
    TensorInfo tensor;
    tensor.name = cursor.read_string("tensor name");
    if (tensor.name.empty() || tensor.name.size() > kMaxTensorName) {
      cursor.fail("tensor " + std::to_string(i) + " has a name of " + std::to_string(tensor.name.size()) +
                  " bytes (1 to " + std::to_string(kMaxTensorName) + " allowed)");
    }
    if (tensor_names.contains(tensor.name)) cursor.fail("tensor '" + tensor.name + "' appears twice");
    const uint32_t n_dims = cursor.read<uint32_t>("tensor dimension count");
    if (n_dims == 0 || n_dims > kMaxDims) {
      cursor.fail("tensor '" + tensor.name + "' has " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    }
    for (uint32_t d = 0; d < n_dims; ++d) tensor.shape.push_back(cursor.read<uint64_t>("tensor dimension"));
    tensor.type = cursor.read<uint32_t>("tensor type");
    tensor.offset = cursor.read<uint64_t>("tensor offset");

    const TypeInfo* type = find_type(tensor.type);
    if (type == nullptr) cursor.fail("tensor '" + tensor.name + "' has unknown type id " + std::to_string(tensor.type));
    tensor.n_elements = checked_product(tensor.shape, cursor, tensor.name);
    if (tensor.shape[0] % type->block_elements != 0) {
      cursor.fail("tensor '" + tensor.name + "': a row of " + std::to_string(tensor.shape[0]) +
                  " values is not whole " + std::string(type->name) + " blocks of " +
                  std::to_string(type->block_elements));
    }
    tensor.bytes = tensor.n_elements / type->block_elements * type->block_bytes;
    if (tensor.offset % alignment_ != 0) {
      cursor.fail("tensor '" + tensor.name + "' offset " + std::to_string(tensor.offset) + " is not aligned to " +
                  std::to_string(alignment_));
    }
    tensor_names.emplace(tensor.name, tensors_.size());
    tensors_.push_back(std::move(tensor));
  }

  const uint64_t header_end = cursor.position();
  data_offset_ = (header_end + alignment_ - 1) / alignment_ * alignment_;
  if (tensors_.empty()) return;  // a metadata-only file (e.g. a vocabulary) may end right after its header
  if (data_offset_ > size_) cursor.fail("truncated file: the tensor data section starts past the end");
  const uint64_t data_size = size_ - data_offset_;
  // Tensors are laid out back to back in declaration order, each padded to the alignment, as every GGUF
  // writer does and the peer requires: a damaged offset, shape or type breaks this chain.
  uint64_t expected_offset = 0;
  for (auto& tensor : tensors_) {
    if (tensor.offset != expected_offset) {
      throw Error(name + ": tensor '" + tensor.name + "' has data offset " + std::to_string(tensor.offset) +
                  ", expected " + std::to_string(expected_offset) +
                  " from the sizes of the tensors before it (damaged header?)");
    }
    if (tensor.offset > data_size || tensor.bytes > data_size - tensor.offset) {
      throw Error(name + ": tensor '" + tensor.name + "' (" + std::to_string(tensor.bytes) + " bytes at data offset " +
                  std::to_string(tensor.offset) + ") runs past the end of the file (truncated?)");
    }
    tensor.data = bytes_ + data_offset_ + tensor.offset;
    expected_offset = (tensor.offset + tensor.bytes + alignment_ - 1) / alignment_ * alignment_;
  }
  // Writers pad the last tensor too; a file shorter than that was cut off.
  if (expected_offset > data_size) {
    throw Error(name + ": the tensor data section ends " + std::to_string(expected_offset - data_size) +
                " bytes short of its padded size (truncated?)");
  }
}

const Value* File::find(const std::string& key) const {
  const auto hit = index_.find(key);
  return hit == index_.end() ? nullptr : &metadata_[hit->second].second;
}

Model::Model(const std::filesystem::path& path) {
  const auto split = parse_split_name(path);
  if (!split) {
    files_.push_back(File::open(path));
  } else {
    if (split->count < 1 || split->index < 1 || split->index > split->count) {
      throw Error(path.string() + ": split file name says part " + std::to_string(split->index) + " of " +
                  std::to_string(split->count));
    }
    for (int index = 1; index <= split->count; ++index) {
      const auto part = split_part_path(path, *split, index);
      if (!std::filesystem::exists(part)) {
        throw Error(path.string() + ": split model part " + std::to_string(index) + " of " +
                    std::to_string(split->count) + " is missing: " + part.string());
      }
      files_.push_back(File::open(part));
    }
  }

  if (split) {
    // Parts that carry the split keys must agree with their names.
    for (size_t i = 0; i < files_.size(); ++i) {
      const File& file = *files_[i];
      const Value* count = file.find("split.count");
      const Value* number = file.find("split.no");
      if (count && count->as_uint() != files_.size()) {
        throw Error(file.path().string() + ": split.count does not match the " + std::to_string(files_.size()) +
                    " parts named like it");
      }
      if (number && number->as_uint() != i) {
        throw Error(file.path().string() + ": split.no does not match its place " + std::to_string(i) +
                    " among the parts");
      }
    }
  } else if (const Value* count = first().find("split.count"); count && count->as_uint().value_or(1) > 1) {
    throw Error(path.string() + ": metadata says this is one part of a " + std::to_string(*count->as_uint()) +
                "-part split model, but the file is not named NAME-0000K-of-0000N.gguf");
  }

  for (uint32_t file_index = 0; file_index < files_.size(); ++file_index) {
    for (TensorInfo tensor : files_[file_index]->tensors()) {
      tensor.file_index = file_index;
      if (tensor_index_.contains(tensor.name)) {
        throw Error(files_[file_index]->path().string() + ": tensor '" + tensor.name + "' is also in an earlier part");
      }
      tensor_index_.emplace(tensor.name, tensors_.size());
      tensors_.push_back(std::move(tensor));
    }
  }
  if (const Value* expected = first().find("split.tensors.count")) {
    if (expected->as_uint() != tensors_.size()) {
      throw Error(path.string() + ": split.tensors.count does not match the " + std::to_string(tensors_.size()) +
                  " tensors found in the parts");
    }
  }
}

uint64_t Model::tensor_bytes() const {
  uint64_t bytes = 0;
  for (const auto& tensor : tensors_) bytes += tensor.bytes;
  return bytes;
}

const TensorInfo* Model::find_tensor(const std::string& name) const {
  const auto hit = tensor_index_.find(name);
  return hit == tensor_index_.end() ? nullptr : &tensors_[hit->second];
}

const TensorInfo& Model::tensor(const std::string& name) const {
  if (const auto* found = find_tensor(name)) return *found;
  throw Error(first().path().string() + ": no tensor named '" + name + "'");
}

}  // namespace strata::gguf
