#include "kv_cache.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
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

}  // namespace

size_t KvTensor::bytes(int32_t kv_type, size_t n_rows, int32_t head_dim) {
  const size_t n_values = n_rows * static_cast<size_t>(head_dim);
  if (kv_type != STRATA_KV_INT8) return n_values * sizeof(uint16_t);
  return n_values + n_rows * ((head_dim + kInt8GroupSize - 1) / kInt8GroupSize) * sizeof(float);
}

KvTensor::KvTensor(int32_t kv_type, size_t n_rows, int32_t head_dim)
    : is_int8_(kv_type == STRATA_KV_INT8),
      head_dim_(head_dim),
      groups_per_row_((head_dim + kInt8GroupSize - 1) / kInt8GroupSize) {
  const size_t n_values = n_rows * static_cast<size_t>(head_dim);
  if (is_int8_) {
    levels_.resize(n_values);
    scales_.resize(n_rows * groups_per_row_);
  } else {
    halves_.resize(n_values);
  }
}

void KvTensor::store(size_t row, const float* x) {
  const size_t first = row * head_dim_;
  if (!is_int8_) {
    for (int32_t i = 0; i < head_dim_; ++i) halves_[first + i] = sdk::fp32_to_fp16(x[i]);
    return;
  }
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

float KvTensor::dot(const FloatKernels& kernels, size_t row, const float* x) const {
  const size_t first = row * head_dim_;
  if (!is_int8_) return kernels.dot_f16(halves_.data() + first, x, head_dim_);
  float sum = 0.0f;
  for (int32_t group = 0; group < groups_per_row_; ++group) {
    const int32_t start = group * kInt8GroupSize;
    sum += scales_[row * groups_per_row_ + group] *
           kernels.dot_i8(levels_.data() + first + start, x + start, std::min(kInt8GroupSize, head_dim_ - start));
  }
  return sum;
}

void KvTensor::accumulate(const FloatKernels& kernels, size_t row, float a, float* y) const {
  const size_t first = row * head_dim_;
  if (!is_int8_) {
    kernels.axpy_f16(a, halves_.data() + first, y, head_dim_);
  } else {
    for (int32_t group = 0; group < groups_per_row_; ++group) {
      const int32_t start = group * kInt8GroupSize;
      kernels.axpy_i8(a * scales_[row * groups_per_row_ + group], levels_.data() + first + start, y + start,
                      std::min(kInt8GroupSize, head_dim_ - start));
    }
  }
}

void KvTensor::dot_rows(const FloatKernels& kernels, size_t first, int64_t n_rows, const float* xs, size_t x_stride,
                        int n, float* out, size_t out_stride) const {
  if (!is_int8_) {
    kernels.dot_rows_f16(halves_.data() + first * head_dim_, n_rows, xs, x_stride, n, head_dim_, out, out_stride);
    return;
  }
  for (int v = 0; v < n; ++v) {
    for (int64_t j = 0; j < n_rows; ++j) out[v * out_stride + j] = dot(kernels, first + j, xs + v * x_stride);
  }
}

void KvTensor::accumulate_rows(const FloatKernels& kernels, size_t first, int64_t n_rows, const float* a,
                               size_t a_stride, float* ys, size_t y_stride, int n) const {
  if (!is_int8_) {
    kernels.axpy_rows_f16(a, a_stride, halves_.data() + first * head_dim_, n_rows, ys, y_stride, n, head_dim_);
    return;
  }
  for (int v = 0; v < n; ++v) {
    for (int64_t j = 0; j < n_rows; ++j) accumulate(kernels, first + j, a[v * a_stride + j], ys + v * y_stride);
  }
}

void kv_create(strata_backend* backend, const strata_kv_config* config, strata_kv_cache** out) {
  deref(backend, "backend");
  const auto& checked = deref(config, "kv config");
  deref(out, "out");
  sdk::check_kv_config(checked);
  // The cache is allocated and zeroed whole: one larger than the memory left would end in the OOM killer.
  const size_t bytes = 2 * KvTensor::bytes(checked.kv_type, cache_rows(checked), checked.head_dim);
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
    backend->memory.give_back(
        2 * KvTensor::bytes(cache->config.kv_type, cache_rows(cache->config), cache->config.head_dim));
  }
  delete cache;
}

}  // namespace strata::cpu

strata_kv_cache::strata_kv_cache(const strata_kv_config& config)
    : config(config),
      keys(config.kv_type, strata::cpu::cache_rows(config), config.head_dim),
      values(config.kv_type, strata::cpu::cache_rows(config), config.head_dim) {}
