// Activation buffers in host memory, and weights kept in place where the host mapped them.
#include <cstring>
#include <new>
#include <string>

#include "backend_objects.hpp"
#include "ops.hpp"

namespace strata::cpu {

void buffer_alloc(strata_backend* backend, size_t bytes, strata_buffer** out) {
  deref(backend, "backend");
  deref(out, "out");
  auto buffer = std::make_unique<strata_buffer>();
  buffer->reserve(bytes);
  std::memset(buffer->data.get(), 0, strata_buffer::allocated_bytes(bytes));
  *out = buffer.release();
}

void buffer_free(strata_backend*, strata_buffer* buffer) { delete buffer; }

void buffer_write(strata_backend*, strata_buffer* buffer, size_t offset, const void* src, size_t bytes) {
  sdk::check_buffer_range(deref(buffer, "buffer"), offset, bytes, "buffer_write");
  if (bytes > 0) std::memcpy(buffer->data.get() + offset, &deref(static_cast<const std::byte*>(src), "src"), bytes);
}

void buffer_read(strata_backend*, strata_buffer* buffer, size_t offset, void* dst, size_t bytes) {
  sdk::check_buffer_range(deref(buffer, "buffer"), offset, bytes, "buffer_read");
  if (bytes > 0) std::memcpy(&deref(static_cast<std::byte*>(dst), "dst"), buffer->data.get() + offset, bytes);
}

void weight_load(strata_backend* backend, const strata_weight_desc* desc, strata_weight** out) {
  const auto& checked = deref(desc, "weight desc");
  deref(out, "out");
  const strata_quant_type* type = deref(backend, "backend").find_type(checked.type);
  const std::string name = sdk::check_weight_desc(checked, type);
  auto weight = std::make_unique<strata_weight>();
  weight->name = name;
  weight->type = type;
  weight->ne0 = checked.ne0;
  weight->ne1 = checked.ne1;
  weight->ne2 = checked.ne2;
  weight->row_bytes = static_cast<size_t>(checked.ne0 / type->block_elements) * type->block_bytes;
  weight->data = &deref(static_cast<const std::byte*>(checked.data), "weight data");
  *out = weight.release();
}

void weight_free(strata_backend*, strata_weight* weight) { delete weight; }

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
