// The named functions of an expert cache (strata/backend.h, hybrid expert placement): weights whose matrices
// (slots) the core fills one expert at a time, and the device memory it plans them within.
#include <string>

#include "backend_objects.hpp"
#include "cuda_status.hpp"
#include "ops.hpp"
#include "weight_layout.hpp"

namespace strata::cuda {
namespace {

const strata_weight_write& checked_write(const strata_backend& backend, const strata_weight& weight,
                                         const strata_weight_write* write) {
  const auto& request = deref(write, "weight_write: write");
  if (request.struct_size < STRATA_FIELD_END(strata_weight_write, background)) {
    invalid_argument("weight_write: struct_size is too small");
  }
  const std::string matrix = "matrix " + std::to_string(request.matrix) + " of weight " + weight.name;
  if (!weight.slots) invalid_argument("weight_write: weight " + weight.name + " was not made by weight_alloc");
  if (request.matrix < 0 || request.matrix >= weight.ne2) {
    invalid_argument("weight_write: " + matrix + " is outside its " + std::to_string(weight.ne2) + " matrices");
  }
  if (request.data == nullptr) invalid_argument("weight_write: no data for " + matrix);
  if (request.background != 0 && request.background != 1) {
    invalid_argument("weight_write: background is " + std::to_string(request.background) + " (0 or 1) for " + matrix);
  }
  // A copy queued while a step graph records would join the graph (and replay with every step), a background
  // one would tie the copy stream into the capture; a concurrent region's ops are on several streams.
  if (backend.recording != nullptr) invalid_argument("weight_write: a step graph is recording (" + matrix + ")");
  if (backend.region_ops >= 0) invalid_argument("weight_write: inside a concurrent region (" + matrix + ")");
  return request;
}

// Whether host bytes are page-locked (cudaHostAlloc, cudaHostRegister): a copy from them needs no staging.
bool page_locked(const void* data) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, data) != cudaSuccess) {
    cudaGetLastError();  // an unknown pointer is pageable memory, not an error to keep
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

}  // namespace

void weight_alloc(strata_backend* backend, const strata_weight_desc* desc, strata_weight** out) {
  auto& instance = deref(backend, "backend");
  const auto& checked = deref(desc, "weight desc");
  deref(out, "out");
  auto weight = device_weight(instance, checked, /*file_layout=*/true);
  weight->slots = true;
  // Zeros decode as zeros in every layout (each block's scales are zero), finite wherever a slot is read unwritten.
  check(cudaMemsetAsync(weight->device.get(), 0, weight->device.bytes(), instance.stream),
        "zeroing weight " + weight->name);
  *out = weight.release();
}

void weight_write(strata_backend* backend, strata_weight* weight, const strata_weight_write* write) {
  auto& instance = deref(backend, "backend");
  auto& target = deref(weight, "weight_write: weight");
  const auto& request = checked_write(instance, target, write);
  const auto mode = request.background != 0 ? WeightWrites::Mode::background : WeightWrites::Mode::ordered;
  const auto* data = static_cast<const std::byte*>(request.data);
  std::byte* slot = target.device.as<std::byte>() + static_cast<size_t>(request.matrix) * target.matrix_bytes();
  if (target.layout == target.type && page_locked(data)) {
    // The copy engine reads page-locked bytes directly (the core's pinned expert store): no staging copy.
    instance.weight_writes.copy_from(mode, instance.stream, target.written, slot, data, target.matrix_bytes());
    return;
  }
  instance.weight_writes.copy(
      mode, instance.stream, target.written, slot, target.matrix_bytes(),
      [&](std::byte* staging) { to_device_layout(target, data, staging, static_cast<size_t>(target.ne1)); });
}

void weight_writes_done(strata_backend* backend, int32_t* done) {
  auto& instance = deref(backend, "backend");
  deref(done, "done") = instance.weight_writes.done() ? 1 : 0;
}

void memory_info(strata_backend* backend, strata_memory_info* info) {
  auto& instance = deref(backend, "backend");
  auto& answer = deref(info, "memory_info: info");
  if (answer.struct_size < STRATA_FIELD_END(strata_memory_info, used_bytes)) {
    invalid_argument("memory_info: struct_size is too small");
  }
  answer.limit_bytes = instance.budget.limit();
  answer.used_bytes = instance.budget.used();
}

}  // namespace strata::cuda
