// Activation buffers and weights in device memory, and the embedding lookup.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend_objects.hpp"
#include "cuda_status.hpp"
#include "ops.hpp"
#include "weight_layout.hpp"

namespace strata::cuda {

void buffer_alloc(strata_backend* backend, size_t bytes, strata_buffer** out) {
  auto& instance = deref(backend, "backend");
  deref(out, "out");
  auto buffer = std::make_unique<strata_buffer>();
  buffer->memory = instance.budget.allocate(bytes, "a buffer of " + std::to_string(bytes) + " bytes");
  buffer->bytes = bytes;
  // Zeroed, as the CPU backend's buffers are.
  check(cudaMemsetAsync(buffer->memory.get(), 0, buffer->memory.bytes(), instance.stream), "zeroing a buffer");
  *out = buffer.release();
}

void buffer_free(strata_backend* backend, strata_buffer* buffer) {
  // Queued ops may still use the memory; cudaFree waits for the device, this makes the wait explicit.
  if (backend != nullptr && buffer != nullptr) cudaStreamSynchronize(backend->stream);
  delete buffer;
}

void buffer_write(strata_backend* backend, strata_buffer* buffer, size_t offset, const void* src, size_t bytes) {
  auto& instance = deref(backend, "backend");
  sdk::check_buffer_range(deref(buffer, "buffer"), offset, bytes, "buffer_write");
  if (bytes == 0) return;
  buffer->note_write();
  check(cudaMemcpyAsync(buffer->memory.as<std::byte>() + offset, &deref(static_cast<const std::byte*>(src), "src"),
                        bytes, cudaMemcpyHostToDevice, instance.stream),
        "buffer_write");
}

namespace {

void wait_for_reads(strata_backend& instance, const char* what) {
  check(cudaStreamSynchronize(instance.stream), std::string(what) + ": waiting for the queued ops");
}

}  // namespace

void buffer_read(strata_backend* backend, strata_buffer* buffer, size_t offset, void* dst, size_t bytes) {
  auto& instance = deref(backend, "backend");
  sdk::check_buffer_range(deref(buffer, "buffer"), offset, bytes, "buffer_read");
  if (bytes == 0) return wait_for_reads(instance, "buffer_read");
  auto* destination = &deref(static_cast<std::byte*>(dst), "dst");
  const auto* source = buffer->memory.as<std::byte>() + offset;
  const auto copy_and_wait = [&](void* to, const std::byte* from, size_t piece) {
    check(cudaMemcpyAsync(to, from, piece, cudaMemcpyDeviceToHost, instance.stream), "buffer_read");
    wait_for_reads(instance, "buffer_read");
  };
  if (instance.in_host_memory(destination, bytes)) return copy_and_wait(destination, source, bytes);
  // Else through page-locked memory of at most kReadStagingBytes, a piece at a time: a prompt's logits for every
  // token (hundreds of MB) need not stay pinned for the backend's life.
  void* staging = instance.read_staging.get(std::min(bytes, kReadStagingBytes));
  for (size_t done = 0; done < bytes; done += kReadStagingBytes) {
    const size_t piece = std::min(bytes - done, kReadStagingBytes);
    copy_and_wait(staging, source + done, piece);
    std::memcpy(destination + done, staging, piece);
  }
}

void buffer_reads(strata_backend* backend, const strata_buffer_reads* reads) {
  auto& instance = deref(backend, "backend");
  const auto& request = deref(reads, "reads");
  if (request.struct_size < STRATA_FIELD_END(strata_buffer_reads, items)) {
    invalid_argument("buffer_reads: struct_size is too small");
  }
  if (request.count < 0) invalid_argument("buffer_reads: count is negative");
  const std::span items(request.count > 0 ? &deref(request.items, "items") : nullptr,
                        static_cast<size_t>(request.count));
  // The pieces that go through the staging memory, each at an aligned place in it.
  constexpr size_t kAlign = 64;
  std::vector<size_t> staged_at(items.size(), SIZE_MAX);
  size_t staged = 0;
  for (size_t k = 0; k < items.size(); ++k) {
    const strata_buffer_read_item& item = items[k];
    sdk::check_buffer_range(deref(item.buffer, "buffer"), item.offset, item.bytes, "buffer_reads");
    if (item.bytes == 0) continue;
    if (instance.in_host_memory(&deref(static_cast<std::byte*>(item.dst), "dst"), item.bytes)) continue;
    staged_at[k] = staged;
    staged += (item.bytes + kAlign - 1) / kAlign * kAlign;
  }
  if (staged > kReadStagingBytes) {  // large reads: a piece at a time, as buffer_read goes
    for (const strata_buffer_read_item& item : items)
      buffer_read(backend, item.buffer, item.offset, item.dst, item.bytes);
    return;
  }
  auto* staging = static_cast<std::byte*>(staged > 0 ? instance.read_staging.get(staged) : nullptr);
  for (size_t k = 0; k < items.size(); ++k) {
    const strata_buffer_read_item& item = items[k];
    if (item.bytes == 0) continue;
    void* to = staged_at[k] == SIZE_MAX ? item.dst : staging + staged_at[k];
    check(cudaMemcpyAsync(to, item.buffer->memory.as<std::byte>() + item.offset, item.bytes, cudaMemcpyDeviceToHost,
                          instance.stream),
          "buffer_reads");
  }
  wait_for_reads(instance, "buffer_reads");
  for (size_t k = 0; k < items.size(); ++k) {
    if (staged_at[k] != SIZE_MAX) std::memcpy(items[k].dst, staging + staged_at[k], items[k].bytes);
  }
}

void host_alloc(strata_backend* backend, size_t bytes, void** out) {
  auto& instance = deref(backend, "backend");
  void*& memory = deref(out, "out");
  if (bytes == 0) invalid_argument("host_alloc: 0 bytes");
  void* block = nullptr;
  check(cudaMallocHost(&block, bytes), "host_alloc: page-locked host memory of " + std::to_string(bytes) + " bytes");
  try {
    instance.host_memory.emplace(static_cast<const std::byte*>(block), bytes);
  } catch (...) {
    cudaFreeHost(block);
    throw;
  }
  memory = block;
}

void host_free(strata_backend* backend, void* memory) {
  if (backend == nullptr || memory == nullptr) return;
  cudaStreamSynchronize(backend->stream);  // a queued read may still land there
  backend->host_memory.erase(static_cast<const std::byte*>(memory));
  cudaFreeHost(memory);
}

void weight_load(strata_backend* backend, const strata_weight_desc* desc, strata_weight** out) {
  auto& instance = deref(backend, "backend");
  const auto& checked = deref(desc, "weight desc");
  deref(out, "out");
  auto weight = device_weight(instance, checked);
  weight->host = &deref(static_cast<const std::byte*>(checked.data), "weight data");
  const auto rows = static_cast<size_t>(checked.ne1 * checked.ne2);
  const void* upload = weight->host;
  std::vector<std::byte> repacked;
  if (weight->layout != weight->type) {
    repacked.resize(weight->row_bytes * rows);
    to_device_layout(*weight, weight->host, repacked.data(), rows);
    upload = repacked.data();
  }
  // Waited for here: the host bytes may be an mmap-ed file touched for the first time, and a copy from pageable
  // memory returns once the bytes are staged, before they land (cudaMemcpy too, on the legacy stream, which
  // the backend's non-blocking streams do not wait for): a kernel right after could read part of the old bytes.
  check(
      cudaMemcpyAsync(weight->device.get(), upload, weight->row_bytes * rows, cudaMemcpyHostToDevice, instance.stream),
      "uploading weight " + weight->name);
  check(cudaStreamSynchronize(instance.stream), "uploading weight " + weight->name);
  *out = weight.release();
}

void weight_free(strata_backend* backend, strata_weight* weight) {
  if (backend != nullptr && weight != nullptr) {
    cudaStreamSynchronize(backend->stream);
    backend->weight_writes.wait(&weight->written);  // a weight_write may still copy into it
  }
  delete weight;
}

const float* f32_vector(const strata_weight* weight, int64_t width, const char* what) {
  const auto& checked = deref(weight, what);
  if (checked.type->type_id != kTypeF32 || checked.ne0 * checked.ne1 * checked.ne2 < width) {
    invalid_argument(std::string(what) + " " + checked.name + ": expected " + std::to_string(width) +
                     " F32 values, got type " + checked.type->name + " with " +
                     std::to_string(checked.ne0 * checked.ne1 * checked.ne2) + " values");
  }
  return checked.device.as<const float>();
}

// A handful of rows per step: they are decoded on the host by the type's exact reference dequantizer
// and copied up, which serves every type, with or without CUDA kernels, with the CPU backend's values.
void get_rows(strata_backend* backend, const strata_weight* table, const int32_t* ids, int32_t n_ids,
              strata_buffer* out) {
  auto& instance = deref(backend, "backend");
  const auto& weight = deref(table, "get_rows table");
  if (weight.host == nullptr) {
    invalid_argument("get_rows: " + weight.name + " has no host bytes to decode (an expert cache from weight_alloc)");
  }
  float* out_values = sdk::get_rows_output(weight, ids, n_ids, out);
  const int64_t width = weight.ne0;
  std::vector<float> rows(static_cast<size_t>(n_ids * width));
  for (int32_t i = 0; i < n_ids; ++i) {
    if (ids[i] < 0 || ids[i] >= weight.ne1) {
      invalid_argument("get_rows: row " + std::to_string(ids[i]) + " is outside the " + std::to_string(weight.ne1) +
                       " rows of " + weight.name);
    }
    check_call([&](strata_error* error) {
      return weight.type->dequantize(weight.host + ids[i] * weight.host_row_bytes, rows.data() + i * width,
                                     width / weight.type->block_elements, error);
    });
  }
  if (rows.empty()) return;
  check(cudaMemcpyAsync(out_values, rows.data(), rows.size() * sizeof(float), cudaMemcpyHostToDevice, instance.stream),
        "get_rows: copying the rows");
}

}  // namespace strata::cuda
