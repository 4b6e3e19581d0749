// Row-wise and elementwise ops: embedding lookup, RMS norm, NEOX rope, add, mul, unary, row scaling.
#include <algorithm>
#include <cmath>
#include <string>

#include "activation_functions.hpp"
#include "backend_objects.hpp"
#include "ops.hpp"

namespace strata::cpu {
namespace {

// Elementwise work is split into chunks big enough that a fork-join pays off.
constexpr int64_t kElementsPerChunk = 16384;

// fn(begin, end) over [0, n) in chunks of kElementsPerChunk, the chunks shared among the threads.
template <class Fn>
void parallel_chunks(strata_backend& backend, int64_t n, Fn fn) {
  const int64_t n_chunks = (n + kElementsPerChunk - 1) / kElementsPerChunk;
  backend.pool.parallel_for(n_chunks, [&](int64_t begin, int64_t end, int) {
    fn(begin * kElementsPerChunk, std::min(n, end * kElementsPerChunk));
  });
}

template <class Fn>
void parallel_elements(strata_backend& backend, int64_t n, Fn fn) {
  parallel_chunks(backend, n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) fn(i);
  });
}

// out = kernel(a, b) element by element, through the instruction set's kernel.
void binary(strata_backend* backend, const strata_buffer* a, const strata_buffer* b, int64_t n, strata_buffer* out,
            const char* what, void (*FloatKernels::*kernel)(const float*, const float*, float*, int64_t)) {
  auto& instance = deref(backend, "backend");
  const float* a_values = floats(a, n, what);
  const float* b_values = floats(b, n, what);
  float* out_values = floats(out, n, what);
  const auto elementwise = instance.kernels.*kernel;
  parallel_chunks(instance, n, [&](int64_t begin, int64_t end) {
    elementwise(a_values + begin, b_values + begin, out_values + begin, end - begin);
  });
}

}  // namespace

void get_rows(strata_backend* backend, const strata_weight* table, const int32_t* ids, int32_t n_ids,
              strata_buffer* out) {
  auto& instance = deref(backend, "backend");
  const auto& weight = deref(table, "get_rows table");
  float* out_values = sdk::get_rows_output(weight, ids, n_ids, out);
  const int64_t width = weight.ne0;
  for (int32_t i = 0; i < n_ids; ++i) {
    if (ids[i] < 0 || ids[i] >= weight.ne1) {
      invalid_argument("get_rows: row " + std::to_string(ids[i]) + " is outside the " + std::to_string(weight.ne1) +
                       " rows of " + weight.name);
    }
  }
  instance.pool.parallel_for(n_ids, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      call_codec([&](strata_error* error) {
        return weight.type->dequantize(weight.data + ids[i] * weight.row_bytes, out_values + i * width,
                                       width / weight.type->block_elements, error);
      });
    }
  });
}

namespace {

// out = rms_norm(x) row by row; with y, x first becomes x + y (written to x_sum, the same rows as x).
void norm_rows(strata_backend& instance, const sdk::NormOperands& rows_of, const float* gain, int32_t rows,
               int32_t width, float eps) {
  const auto [x, x_sum, y, out] = rows_of;
  instance.pool.parallel_for(rows, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = x + r * width;
      if (y != nullptr) instance.kernels.add(row, y + r * width, x_sum + r * width, width);
      const float mean = instance.kernels.dot(row, row, width) / static_cast<float>(width);
      const float scale = 1.0f / std::sqrt(mean + eps);
      instance.kernels.scale_mul(row, scale, gain, out + r * width, width);
    }
  });
}

}  // namespace

void rms_norm(strata_backend* backend, const strata_buffer* x, const strata_weight* weight, int32_t rows, int32_t width,
              float eps, strata_buffer* out) {
  norm_rows(deref(backend, "backend"), sdk::norm_operands(x, nullptr, rows, width, out),
            f32_vector(weight, width, "rms_norm weight"), rows, width, eps);
}

// The residual step in one pass over each row: the same float operations as add, then rms_norm.
void add_rms_norm(strata_backend* backend, strata_buffer* x, const strata_buffer* y, const strata_weight* weight,
                  int32_t rows, int32_t width, float eps, strata_buffer* out) {
  norm_rows(deref(backend, "backend"), sdk::norm_operands(x, y, rows, width, out),
            f32_vector(weight, width, "add_rms_norm weight"), rows, width, eps);
}

void rope_neox(strata_backend* backend, strata_buffer* x, const int32_t* positions, int32_t n_tokens, int32_t n_heads,
               int32_t head_dim, int32_t n_rot, float base) {
  auto& instance = deref(backend, "backend");
  sdk::check_rope_args(positions, n_tokens, n_heads, head_dim, n_rot);
  const int64_t token_width = int64_t{n_heads} * head_dim;
  float* values = floats(x, n_tokens * token_width, "rope_neox x");
  const int32_t half = n_rot / 2;
  // As ggml: the angle of pair i is position * theta_scale^i, theta_scale = base^(-2/n_rot), in float.
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  instance.pool.parallel_for(n_tokens, [&](int64_t begin, int64_t end, int worker) {
    float* cos_sin = instance.worker_floats(worker, static_cast<size_t>(n_rot));
    for (int64_t t = begin; t < end; ++t) {
      float theta = static_cast<float>(positions[t]);
      for (int32_t i = 0; i < half; ++i) {
        cos_sin[2 * i] = std::cos(theta);
        cos_sin[2 * i + 1] = std::sin(theta);
        theta *= theta_scale;
      }
      for (int32_t head = 0; head < n_heads; ++head) {
        float* v = values + t * token_width + int64_t{head} * head_dim;
        for (int32_t i = 0; i < half; ++i) {
          const float x0 = v[i], x1 = v[i + half];
          v[i] = x0 * cos_sin[2 * i] - x1 * cos_sin[2 * i + 1];
          v[i + half] = x0 * cos_sin[2 * i + 1] + x1 * cos_sin[2 * i];
        }
      }
    }
  });
}

void add(strata_backend* backend, const strata_buffer* a, const strata_buffer* b, int64_t n, strata_buffer* out) {
  binary(backend, a, b, n, out, "add", &FloatKernels::add);
}

void mul(strata_backend* backend, const strata_buffer* a, const strata_buffer* b, int64_t n, strata_buffer* out) {
  binary(backend, a, b, n, out, "mul", &FloatKernels::mul);
}

void unary(strata_backend* backend, int32_t op, const strata_buffer* x, int64_t n, strata_buffer* out) {
  auto& instance = deref(backend, "backend");
  const float* x_values = floats(x, n, "unary x");
  float* out_values = floats(out, n, "unary out");
  switch (op) {
    case STRATA_UNARY_SILU:
      parallel_elements(instance, n, [&](int64_t i) { out_values[i] = silu(x_values[i]); });
      return;
    case STRATA_UNARY_SIGMOID:
      parallel_elements(instance, n, [&](int64_t i) { out_values[i] = sigmoid(x_values[i]); });
      return;
  }
  invalid_argument("unary: unknown op " + std::to_string(op));
}

void scale_rows(strata_backend* backend, strata_buffer* x, const strata_buffer* scale, int32_t rows, int32_t width) {
  auto& instance = deref(backend, "backend");
  if (rows < 0 || width < 0) invalid_argument("scale_rows: bad shape");
  float* values = floats(x, int64_t{rows} * width, "scale_rows x");
  const float* scales = floats(scale, rows, "scale_rows scale");
  parallel_elements(instance, int64_t{rows} * width, [&](int64_t i) { values[i] *= scales[i / width]; });
}

}  // namespace strata::cpu
