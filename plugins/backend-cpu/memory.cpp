// Activation buffers in host memory, and weights kept in place where the host mapped them.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <thread>

#include "backend_objects.hpp"
#include "ops.hpp"
#include "strata/host_memory.hpp"

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

// Ops run as they are called here, so the write waits on the calling thread (polling, then napping) and copies.
void signalled_write(strata_backend* backend, const strata_signalled_write* write) {
  const auto& request = deref(write, "write");
  if (request.struct_size < STRATA_FIELD_END(strata_signalled_write, value)) {
    invalid_argument("signalled_write: struct_size is too small");
  }
  auto* signal = const_cast<uint64_t*>(&deref(request.signal, "signal"));
  constexpr auto kMaxWait = std::chrono::seconds(60);  // strata/backend.h: fail rather than hang
  const auto start = std::chrono::steady_clock::now();
  for (int polls = 0; __atomic_load_n(signal, __ATOMIC_ACQUIRE) < request.value; ++polls) {
    if (std::chrono::steady_clock::now() - start > kMaxWait) {
      throw sdk::Failure(STRATA_E_INTERNAL, "signalled_write: no signal of " + std::to_string(request.value) +
                                                " within 60 s (the value is " + std::to_string(*signal) + ")");
    }
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  buffer_write(backend, request.buffer, request.offset, request.src, request.bytes);
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

// Host memory a repacked copy leaves free at least (for the KV cache, scratch and the rest of the process); a weight
// that would leave less stays in place.
constexpr uint64_t kRepackHeadroom = uint64_t{1} << 30;

// The type's CPU layout, where the instance repacks and the type has one.
const strata_quant_type* cpu_layout(const strata_backend& backend, const strata_quant_type& type) {
  if (!backend.repack_weights || !STRATA_HAS_FIELD(&type, cpu_repack) || type.cpu_repack == nullptr) return nullptr;
  return type.cpu_repacked;
}

// The weight's rows converted into layout in memory of its own, its blocks shared out over the pool's threads.
void repack(strata_backend& backend, strata_weight& weight, const strata_quant_type& layout) {
  const strata_quant_type& file_type = *weight.type;
  const auto n_blocks = static_cast<int64_t>(weight.bytes() / file_type.block_bytes);
  weight.type = &layout;
  weight.row_bytes = static_cast<size_t>(weight.ne0 / layout.block_elements) * layout.block_bytes;
  weight.owned = std::make_unique_for_overwrite<std::byte[]>(weight.bytes());
  constexpr int64_t kBlocksPerChunk = 4096;  // a chunk per thread at least: a small weight's repack is one call
  backend.pool.parallel_for(
      n_blocks,
      [&](int64_t begin, int64_t end, int) {
        call_codec([&](strata_error* error) {
          return file_type.cpu_repack(weight.data + begin * file_type.block_bytes,
                                      weight.owned.get() + begin * layout.block_bytes, end - begin, error);
        });
      },
      kBlocksPerChunk);
  weight.data = weight.owned.get();
}

}  // namespace

void weight_load(strata_backend* backend, const strata_weight_desc* desc, strata_weight** out) {
  auto& instance = deref(backend, "backend");
  const auto& checked = deref(desc, "weight desc");
  deref(out, "out");
  auto weight = new_weight(instance, checked);
  weight->data = &deref(static_cast<const std::byte*>(checked.data), "weight data");
  // Read in place, but on a GPU it would take the device's memory: counted so that the budget simulates one. A
  // weight kept in its type's CPU layout is a copy of that layout's size, made where the host has the memory and
  // kRepackHeadroom more (else it stays in place: slower, not failed).
  const strata_quant_type* layout = cpu_layout(instance, *weight->type);
  const uint64_t repacked_bytes =
      layout == nullptr ? 0 : weight->bytes() / weight->type->block_bytes * layout->block_bytes;
  if (layout != nullptr && repacked_bytes + kRepackHeadroom <= sdk::available_host_memory()) {
    instance.memory.take(repacked_bytes, "weight " + weight->name);
    try {
      repack(instance, *weight, *layout);
    } catch (...) {
      instance.memory.give_back(repacked_bytes);
      throw;
    }
  } else {
    instance.memory.take(weight->bytes(), "weight " + weight->name);
  }
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
