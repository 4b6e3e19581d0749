// Activation buffers in host memory, and weights kept in place where the host mapped them.
#include <cstring>
#include <new>
#include <string>

#include "backend_objects.hpp"
#include "ops.hpp"

namespace strata::cpu {

void buffer_alloc(strata_backend* backend, size_t bytes, strata_buffer** out) {
  auto& instance = deref(backend, "backend");
  deref(out, "out");
  auto buffer = std::make_unique<strata_buffer>();
  buffer->reserve(bytes);
  std::memset(buffer->data.get(), 0, strata_buffer::allocated_bytes(bytes));
  instance.memory.take(bytes, "a buffer of " + std::to_string(bytes) + " bytes");
  *out = buffer.release();
}

void buffer_free(strata_backend* backend, strata_buffer* buffer) {
  if (backend != nullptr && buffer != nullptr) backend->memory.give_back(buffer->bytes);
  delete buffer;
}

void buffer_write(strata_backend*, strata_buffer* buffer, size_t offset, const void* src, size_t bytes) {
  sdk::check_buffer_range(deref(buffer, "buffer"), offset, bytes, "buffer_write");
  if (bytes > 0) std::memcpy(buffer->data.get() + offset, &deref(static_cast<const std::byte*>(src), "src"), bytes);
}

void buffer_read(strata_backend*, strata_buffer* buffer, size_t offset, void* dst, size_t bytes) {
  sdk::check_buffer_range(deref(buffer, "buffer"), offset, bytes, "buffer_read");
  if (bytes > 0) std::memcpy(&deref(static_cast<std::byte*>(dst), "dst"), buffer->data.get() + offset, bytes);
}

namespace {

std::unique_ptr<strata_weight> new_weight(const strata_backend& backend, const strata_weight_desc& desc) {
  const strata_quant_type* type = backend.find_type(desc.type);
  auto weight = std::make_unique<strata_weight>();
  weight->name = sdk::check_weight_desc(desc, type);
  weight->type = type;
  weight->ne0 = desc.ne0;
  weight->ne1 = desc.ne1;
  weight->ne2 = desc.ne2;
  weight->row_bytes = static_cast<size_t>(desc.ne0 / type->block_elements) * type->block_bytes;
  return weight;
}

}  // namespace

void weight_load(strata_backend* backend, const strata_weight_desc* desc, strata_weight** out) {
  auto& instance = deref(backend, "backend");
  const auto& checked = deref(desc, "weight desc");
  deref(out, "out");
  auto weight = new_weight(instance, checked);
  weight->data = &deref(static_cast<const std::byte*>(checked.data), "weight data");
  // Read in place, but on a GPU it would take the device's memory: counted so that the budget simulates one.
  instance.memory.take(weight->bytes(), "weight " + weight->name);
  *out = weight.release();
}

void weight_free(strata_backend* backend, strata_weight* weight) {
  if (backend != nullptr && weight != nullptr) backend->memory.give_back(weight->bytes());
  delete weight;
}

// An expert cache's slots: the instance's own memory, zeroed, filled matrix by matrix by weight_write.
void weight_alloc(strata_backend* backend, const strata_weight_desc* desc, strata_weight** out) {
  auto& instance = deref(backend, "backend");
  deref(out, "out");
  auto weight = new_weight(instance, deref(desc, "weight desc"));
  instance.memory.take(weight->bytes(), "expert cache " + weight->name);
  try {
    weight->owned = std::make_unique<std::byte[]>(weight->bytes());  // value-initialized: zeros
  } catch (...) {
    instance.memory.give_back(weight->bytes());
    throw;
  }
  weight->data = weight->owned.get();
  *out = weight.release();
}

// Ops run in call order on the calling thread, so a background write is done when the call returns.
void weight_write(strata_backend* backend, strata_weight* weight, const strata_weight_write* write) {
  deref(backend, "backend");
  auto& target = deref(weight, "weight_write weight");
  const auto& checked = deref(write, "weight_write arguments");
  if (!target.owned) invalid_argument("weight_write: " + target.name + " was not made by weight_alloc");
  if (checked.matrix < 0 || checked.matrix >= target.ne2) {
    invalid_argument("weight_write: matrix " + std::to_string(checked.matrix) + " is outside the " +
                     std::to_string(target.ne2) + " matrices of " + target.name);
  }
  std::memcpy(target.owned.get() + static_cast<size_t>(checked.matrix) * target.matrix_bytes(),
              &deref(static_cast<const std::byte*>(checked.data), "weight_write data"), target.matrix_bytes());
}

void weight_writes_done(strata_backend* backend, int32_t* done) {
  deref(backend, "backend");
  deref(done, "done") = 1;
}

void memory_info(strata_backend* backend, strata_memory_info* info) {
  const auto& instance = deref(backend, "backend");
  auto& checked = deref(info, "memory_info");
  if (checked.struct_size < STRATA_FIELD_END(strata_memory_info, used_bytes)) {
    invalid_argument("memory_info: struct_size is too small");
  }
  checked.limit_bytes = instance.memory.limit();
  checked.used_bytes = instance.memory.used();
}

const float* f32_vector(const strata_weight* weight, int64_t width, const char* what) {
  const auto& checked = deref(weight, what);
  if (checked.type->type_id != kTypeF32 || checked.ne0 * checked.ne1 * checked.ne2 < width) {
    invalid_argument(std::string(what) + " " + checked.name + ": expected " + std::to_string(width) +
                     " F32 values, got type " + checked.type->name + " with " +
                     std::to_string(checked.ne0 * checked.ne1 * checked.ne2) + " values");
  }
  return reinterpret_cast<const float*>(checked.data);
}

}  // namespace strata::cpu
