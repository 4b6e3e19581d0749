#include "kv_cache.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "backend_objects.hpp"
#include "ops.hpp"
#include "strata/half.hpp"
#include "strata/host_memory.hpp"

namespace strata::cpu {
namespace {

size_t cache_rows(const strata_kv_config& config) {
  return static_cast<size_t>(config.n_layers) * config.n_head_kv * config.n_ctx;
}

int64_t padded_ctx(int32_t n_ctx) { return (int64_t{n_ctx} + kKeyBlock - 1) / kKeyBlock * kKeyBlock; }

}  // namespace

size_t KvTensor::bytes(Role role, const strata_kv_config& config) {
  const size_t rows = cache_rows(config), head_dim = static_cast<size_t>(config.head_dim);
  if (config.kv_type == STRATA_KV_INT8) {
    return rows * head_dim + rows * ((head_dim + kInt8GroupSize - 1) / kInt8GroupSize) * sizeof(float);
  }
  const size_t stored_rows = role == Role::keys ? rows / config.n_ctx * padded_ctx(config.n_ctx) : rows;
  return stored_rows * head_dim * sizeof(uint16_t);
}

KvTensor::KvTensor(Role role, const strata_kv_config& config)
    : is_int8_(config.kv_type == STRATA_KV_INT8),
      blocked_(!is_int8_ && role == Role::keys),
      head_dim_(config.head_dim),
      n_ctx_(config.n_ctx),
      groups_per_row_((config.head_dim + kInt8GroupSize - 1) / kInt8GroupSize) {
  const size_t n_rows = cache_rows(config), n_values = n_rows * static_cast<size_t>(head_dim_);
  if (is_int8_) {
    levels_.resize(n_values);
    scales_.resize(n_rows * groups_per_row_);
  } else {
    halves_.resize(bytes(role, config) / sizeof(uint16_t));
  }
}

size_t KvTensor::half_offset(size_t row) const {
  if (!blocked_) return row * head_dim_;
  const size_t span = row / n_ctx_, position = row % n_ctx_;
  const size_t block = span * static_cast<size_t>(padded_ctx(n_ctx_) / kKeyBlock) + position / kKeyBlock;
  return block * kKeyBlock * head_dim_ + position % kKeyBlock;
}

void KvTensor::store(const FloatKernels& kernels, size_t row, const float* x) {
  if (!is_int8_) {
    kernels.to_halves(x, head_dim_, halves_.data() + half_offset(row), blocked_ ? kKeyBlock : 1);
    return;
  }
  const size_t first = row * head_dim_;
  for (int32_t group = 0; group < groups_per_row_; ++group) {
    const int32_t start = group * kInt8GroupSize;
    const int32_t size = std::min(kInt8GroupSize, head_dim_ - start);
    // std::max passes over NaN: a group holding NaN or infinity gets a NaN scale, so that what attends to it
    // is NaN too (as in the f16 cache) instead of silently reading levels of 0. x * 0 is NaN for those alone.
    float amax = 0.0f, non_finite = 0.0f;
    for (int32_t i = 0; i < size; ++i) {
      amax = std::max(amax, std::fabs(x[start + i]));
      non_finite += x[start + i] * 0.0f;
    }
    const bool finite = non_finite == 0.0f;
    const float scale = finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
    const float inverse = finite && scale != 0.0f ? 1.0f / scale : 0.0f;
    for (int32_t i = 0; i < size; ++i)
      levels_[first + start + i] = static_cast<int8_t>(std::lround(x[start + i] * inverse));
    scales_[row * groups_per_row_ + group] = scale;
  }
}

float KvTensor::dot_int8(const FloatKernels& kernels, size_t row, const float* x) const {
  const size_t first = row * head_dim_;
  float sum = 0.0f;
  for (int32_t group = 0; group < groups_per_row_; ++group) {
    const int32_t start = group * kInt8GroupSize;
    sum += scales_[row * groups_per_row_ + group] *
           kernels.dot_i8(levels_.data() + first + start, x + start, std::min(kInt8GroupSize, head_dim_ - start));
  }
  return sum;
}

void KvTensor::accumulate_int8(const FloatKernels& kernels, size_t row, float a, float* y) const {
  const size_t first = row * head_dim_;
  for (int32_t group = 0; group < groups_per_row_; ++group) {
    const int32_t start = group * kInt8GroupSize;
    kernels.axpy_i8(a * scales_[row * groups_per_row_ + group], levels_.data() + first + start, y + start,
                    std::min(kInt8GroupSize, head_dim_ - start));
  }
}

void KvTensor::dot_rows(const FloatKernels& kernels, size_t first, int64_t n_rows, const float* xs, size_t x_stride,
                        int n, float* out, size_t out_stride) const {
  if (!is_int8_) {
    if (!blocked_) throw std::logic_error("dot_rows over values stored as rows");
    kernels.dot_blocks_f16(halves_.data() + half_offset(first), n_rows, xs, x_stride, n, head_dim_, out, out_stride);
    return;
  }
  for (int v = 0; v < n; ++v) {
    for (int64_t j = 0; j < n_rows; ++j) out[v * out_stride + j] = dot_int8(kernels, first + j, xs + v * x_stride);
  }
}

void KvTensor::accumulate_rows(const FloatKernels& kernels, size_t first, int64_t n_rows, const float* a,
                               size_t a_stride, float* ys, size_t y_stride, int n) const {
  if (blocked_) throw std::logic_error("accumulate_rows over keys stored in blocks");
  if (!is_int8_) {
    kernels.axpy_rows_f16(a, a_stride, halves_.data() + half_offset(first), n_rows, ys, y_stride, n, head_dim_);
    return;
  }
  for (int v = 0; v < n; ++v) {
    for (int64_t j = 0; j < n_rows; ++j) accumulate_int8(kernels, first + j, a[v * a_stride + j], ys + v * y_stride);
  }
}

void kv_create(strata_backend* backend, const strata_kv_config* config, strata_kv_cache** out) {
  deref(backend, "backend");
  const auto& checked = deref(config, "kv config");
  deref(out, "out");
  sdk::check_kv_config(checked);
  // The cache is allocated and zeroed whole: one larger than the memory left would end in the OOM killer.
  const size_t bytes =
      KvTensor::bytes(KvTensor::Role::keys, checked) + KvTensor::bytes(KvTensor::Role::values, checked);
  if (const uint64_t available = sdk::available_host_memory(); bytes > available) {
    throw sdk::Failure(STRATA_E_OUT_OF_MEMORY,
                       "the KV cache of " + std::to_string(checked.n_ctx) + " positions (" +
                           std::to_string(checked.n_layers) + " layers x " + std::to_string(checked.n_head_kv) +
                           " kv heads x " + std::to_string(checked.head_dim) + " values, keys and values, " +
                           (checked.kv_type == STRATA_KV_INT8 ? "int8" : "f16") + ") needs " + gib_text(bytes) +
                           ", more than the " + gib_text(available) + " of memory available");
  }
  backend->memory.take(bytes, "the KV cache");
  *out = new strata_kv_cache(checked);
}

void kv_free(strata_backend* backend, strata_kv_cache* cache) {
  if (backend != nullptr && cache != nullptr) {
    backend->memory.give_back(KvTensor::bytes(KvTensor::Role::keys, cache->config) +
                              KvTensor::bytes(KvTensor::Role::values, cache->config));
  }
  delete cache;
}

}  // namespace strata::cpu

strata_kv_cache::strata_kv_cache(const strata_kv_config& config)
    : config(config),
      keys(strata::cpu::KvTensor::Role::keys, config),
      values(strata::cpu::KvTensor::Role::values, config) {}
