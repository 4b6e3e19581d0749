// Row-wise and elementwise ops: RMS norm, NEOX rope, add, mul, unary, row scaling.
#include <cmath>
#include <cstdint>
#include <string>

#include "activation_functions.cuh"
#include "backend_objects.hpp"
#include "cuda_status.hpp"
#include "normed_input.hpp"
#include "ops.hpp"
#include "rope.cuh"
#include "strata/cuda/block_kernels.cuh"

namespace strata::cuda {
namespace {

constexpr int kThreads = 256;

template <class Op>
__global__ void binary_kernel(const float* a, const float* b, float* out, int64_t n, Op op) {
  sdk::cuda::start_after_previous_kernel();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i] = op(a[i], b[i]);
}

template <class Op>
__global__ void unary_kernel(const float* x, float* out, int64_t n, Op op) {
  sdk::cuda::start_after_previous_kernel();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i] = op(x[i]);
}

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Mul {
  __device__ float operator()(float a, float b) const { return a * b; }
};
struct Silu {
  __device__ float operator()(float x) const { return silu(x); }
};
struct Sigmoid {
  __device__ float operator()(float x) const { return sigmoid(x); }
};

// One block per row: the sum of squares, then out = x * (1 / sqrt(mean + eps)) * gain. With kAdd, x first
// becomes x + y, written to x_sum (x itself for add_rms_norm, another buffer for a normed input's sum) and
// normalized from there. Rows of a multiple of 4 values (kVector) are read 16 bytes at a time with several
// loads in flight per thread: a decode step's norm is a single row, one block, so its loads are all there is
// to hide. With levels (kVector rows of a multiple of 32 values), out is also written rounded to 8 bits as the
// decode kernels round (strata_quant_type::cuda_matvec_q8's layout): 8 consecutive threads hold a group of 32.
template <bool kVector, bool kAdd>
__global__ void rms_norm_kernel(const float* x, const float* y, float* x_sum, const float* gain, float* out, int width,
                                float eps, int8_t* levels, float* level_scales) {
  sdk::cuda::let_next_kernel_launch();
  // The gain is a weight, which no kernel writes: a thread's first float4s of it come in while the kernel
  // before still runs (a decode step's 2048-wide norm needs 2 per thread), not after the row's sum.
  constexpr int kEarlyGains = 4;
  const auto* gains = reinterpret_cast<const float4*>(gain);
  float4 early_gains[kEarlyGains];
  if constexpr (kVector) {
#pragma unroll
    for (int u = 0; u < kEarlyGains; ++u) {
      const int i = threadIdx.x + u * static_cast<int>(blockDim.x);
      early_gains[u] = i < width / 4 ? gains[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
  sdk::cuda::wait_for_previous_kernel();
  __shared__ float warp_sums[kThreads / sdk::cuda::kWarp];
  const int64_t offset = blockIdx.x * int64_t{width};
  const float* row = x + offset;
  float sum = 0.0f;
  if constexpr (kVector) {
    const auto* quads = reinterpret_cast<const float4*>(row);
#pragma unroll 4
    for (int i = threadIdx.x; i < width / 4; i += blockDim.x) {
      float4 v = quads[i];
      if constexpr (kAdd) {
        const float4 a = reinterpret_cast<const float4*>(y + offset)[i];
        v = make_float4(v.x + a.x, v.y + a.y, v.z + a.z, v.w + a.w);
        reinterpret_cast<float4*>(x_sum + offset)[i] = v;
      }
      sum += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  } else {
    for (int i = threadIdx.x; i < width; i += blockDim.x) {
      float v = row[i];
      if constexpr (kAdd) x_sum[offset + i] = v = v + y[offset + i];
      sum += v * v;
    }
  }
  const float scale = 1.0f / sqrtf(sdk::cuda::block_sum(sum, warp_sums) / static_cast<float>(width) + eps);
  // Each thread reads back only the sums it wrote itself above.
  if constexpr (kAdd) row = x_sum + offset;
  float* result = out + offset;
  if constexpr (kVector) {
    const auto* quads = reinterpret_cast<const float4*>(row);
    const int n_quads = width / 4;
    // Whole warps go round when rounding, for the shuffles of group_amax (width / 4 is a multiple of 8).
    const int end =
        levels != nullptr ? (n_quads + sdk::cuda::kWarp - 1) / sdk::cuda::kWarp * sdk::cuda::kWarp : n_quads;
    const auto normalize = [&](int i, float4 g) {
      const bool active = i < n_quads;
      float4 normed = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (active) {
        const float4 v = quads[i];
        normed = make_float4(v.x * scale * g.x, v.y * scale * g.y, v.z * scale * g.z, v.w * scale * g.w);
        reinterpret_cast<float4*>(result)[i] = normed;
      }
      if (levels == nullptr) return;
      const float amax = sdk::cuda::group_amax<8>(
          fmaxf(fmaxf(fabsf(normed.x), fabsf(normed.y)), fmaxf(fabsf(normed.z), fabsf(normed.w))));
      if (!active) return;
      reinterpret_cast<int32_t*>(levels + offset)[i] = sdk::cuda::q8_round4(normed, sdk::cuda::q8_inverse_scale(amax));
      if (i % 8 == 0) level_scales[blockIdx.x * int64_t{width / 32} + i / 8] = sdk::cuda::q8_scale(amax);
    };
    const int stride = static_cast<int>(blockDim.x);
#pragma unroll
    for (int u = 0; u < kEarlyGains; ++u) {
      if (const int i = threadIdx.x + u * stride; i < end) normalize(i, early_gains[u]);
    }
    for (int i = threadIdx.x + kEarlyGains * stride; i < end; i += stride) {
      normalize(i, i < n_quads ? gains[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f));
    }
  } else {
    for (int i = threadIdx.x; i < width; i += blockDim.x) result[i] = row[i] * scale * gain[i];
  }
}

// One block per (token, head), one thread per rotated pair.
__global__ void rope_neox_kernel(float* x, const int32_t* positions, int n_heads, int head_dim, int half,
                                 float theta_scale) {
  sdk::cuda::start_after_previous_kernel();
  const int token = blockIdx.x / n_heads, head = blockIdx.x % n_heads;
  rotate_head(x + (int64_t{token} * n_heads + head) * head_dim, half, positions[token], theta_scale, threadIdx.x,
              blockDim.x);
}

__global__ void scale_rows_kernel(float* x, const float* scale, int64_t n, int width) {
  sdk::cuda::start_after_previous_kernel();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) x[i] *= scale[i / width];
}

template <class Op>
void binary(strata_backend* backend, const strata_buffer* a, const strata_buffer* b, int64_t n, strata_buffer* out,
            const char* what, Op op) {
  auto& instance = deref(backend, "backend");
  const float* a_values = floats(a, n, what);
  const float* b_values = floats(b, n, what);
  float* out_values = floats(out, n, what);
  if (n == 0) return;
  sdk::cuda::launch_after_previous(binary_kernel<Op>, blocks_for(n, kThreads), kThreads, 0, instance.stream, a_values,
                                   b_values, out_values, n, op);
  check_launch(what);
}

template <class Op>
void apply_unary(strata_backend& backend, const float* x, float* out, int64_t n, Op op) {
  if (n == 0) return;
  sdk::cuda::launch_after_previous(unary_kernel<Op>, blocks_for(n, kThreads), kThreads, 0, backend.stream, x, out, n,
                                   op);
  check_launch("unary");
}

}  // namespace

namespace {

// out = rms_norm(x [+ y]); a decode step's (up to kMaxMatvecTokens rows of a multiple of 32 values) also
// rounded to 8 bits into out_buffer's rounded copy, for the matvecs that read it next.
void launch_rms_norm(strata_backend& backend, const sdk::NormOperands& rows_of, const float* gain, int32_t rows,
                     int32_t width, float eps, strata_buffer& out_buffer) {
  if (rows == 0) return;
  const auto [x, x_sum, y, out] = rows_of;
  using sdk::cuda::is_16_byte_aligned;
  const bool vector = width % 4 == 0 && is_16_byte_aligned(x) && is_16_byte_aligned(gain) && is_16_byte_aligned(out) &&
                      (y == nullptr || is_16_byte_aligned(y));
  const bool round = vector && width % 32 == 0 && rows <= sdk::cuda::kMaxMatvecTokens;
  if (round) out_buffer.allocate_rounded(backend.budget);
  const auto kernel = y == nullptr ? (vector ? rms_norm_kernel<true, false> : rms_norm_kernel<false, false>)
                                   : (vector ? rms_norm_kernel<true, true> : rms_norm_kernel<false, true>);
  sdk::cuda::launch_after_previous(kernel, rows, kThreads, 0, backend.stream, x, y, x_sum, gain, out, width, eps,
                                   round ? out_buffer.rounded_levels() : nullptr,
                                   round ? out_buffer.rounded_scales() : nullptr);
  check_launch("rms_norm");
  if (round) out_buffer.mark_rounded(rows, width);
}

}  // namespace

void rms_norm(strata_backend* backend, const strata_buffer* x, const strata_weight* weight, int32_t rows, int32_t width,
              float eps, strata_buffer* out) {
  launch_rms_norm(deref(backend, "backend"), sdk::norm_operands(x, nullptr, rows, width, out),
                  f32_vector(weight, width, "rms_norm weight"), rows, width, eps, *out);
}

void add_rms_norm(strata_backend* backend, strata_buffer* x, const strata_buffer* y, const strata_weight* weight,
                  int32_t rows, int32_t width, float eps, strata_buffer* out) {
  launch_rms_norm(deref(backend, "backend"), sdk::norm_operands(x, y, rows, width, out),
                  f32_vector(weight, width, "add_rms_norm weight"), rows, width, eps, *out);
}

NormedInput normed_input(const strata_normed_input* in, int32_t rows, int32_t width, const std::string& what) {
  const sdk::NormedOperands operands = sdk::normed_operands<strata_buffer>(in, rows, width, what);
  return {operands, f32_vector(in->weight, width, (what + " norm weight").c_str()), in->eps, in->normed};
}

const strata_buffer& normalize_first(strata_backend& backend, const NormedInput& input, int32_t rows, int32_t width) {
  const size_t bytes = static_cast<size_t>(rows) * static_cast<size_t>(width) * sizeof(float);
  strata_buffer& out = input.normed != nullptr ? *input.normed : backend.lane().normed_rows.get(backend.budget, bytes);
  float* x_sum = input.rows.y == nullptr ? nullptr
                 : input.rows.sum != nullptr
                     ? input.rows.sum
                     : backend.lane().residual_sum.get<float>(backend.budget, bytes / sizeof(float));
  float* out_values = sdk::floats(&out, int64_t{rows} * width, "normed input's norm");
  if (input.rows.y == nullptr && input.rows.sum != nullptr) {
    check(cudaMemcpyAsync(input.rows.sum, input.rows.x, bytes, cudaMemcpyDeviceToDevice, backend.stream),
          "copying a normed input's x to its sum");
  }
  launch_rms_norm(backend, sdk::NormOperands{input.rows.x, x_sum, input.rows.y, out_values}, input.gain, rows, width,
                  input.eps, out);
  return out;
}

void rope_neox(strata_backend* backend, strata_buffer* x, const int32_t* positions, int32_t n_tokens, int32_t n_heads,
               int32_t head_dim, int32_t n_rot, float base) {
  auto& instance = deref(backend, "backend");
  sdk::check_rope_args(positions, n_tokens, n_heads, head_dim, n_rot);
  float* values = floats(x, int64_t{n_tokens} * n_heads * head_dim, "rope_neox x");
  if (n_tokens == 0) return;
  const int32_t* on_device = device_positions(instance, positions, n_tokens);
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  const int half = n_rot / 2;
  sdk::cuda::launch_after_previous(rope_neox_kernel, n_tokens * n_heads, std::min(half, kThreads), 0, instance.stream,
                                   values, on_device, n_heads, head_dim, half, theta_scale);
  check_launch("rope_neox");
}

void add(strata_backend* backend, const strata_buffer* a, const strata_buffer* b, int64_t n, strata_buffer* out) {
  binary(backend, a, b, n, out, "add", Add{});
}

void mul(strata_backend* backend, const strata_buffer* a, const strata_buffer* b, int64_t n, strata_buffer* out) {
  binary(backend, a, b, n, out, "mul", Mul{});
}

void unary(strata_backend* backend, int32_t op, const strata_buffer* x, int64_t n, strata_buffer* out) {
  auto& instance = deref(backend, "backend");
  const float* x_values = floats(x, n, "unary x");
  float* out_values = floats(out, n, "unary out");
  switch (op) {
    case STRATA_UNARY_SILU:
      return apply_unary(instance, x_values, out_values, n, Silu{});
    case STRATA_UNARY_SIGMOID:
      return apply_unary(instance, x_values, out_values, n, Sigmoid{});
  }
  invalid_argument("unary: unknown op " + std::to_string(op));
}

void scale_rows(strata_backend* backend, strata_buffer* x, const strata_buffer* scale, int32_t rows, int32_t width) {
  auto& instance = deref(backend, "backend");
  if (rows < 0 || width < 0) invalid_argument("scale_rows: bad shape");
  float* values = floats(x, int64_t{rows} * width, "scale_rows x");
  const float* scales = floats(scale, rows, "scale_rows scale");
  const int64_t n = int64_t{rows} * width;
  if (n == 0) return;
  sdk::cuda::launch_after_previous(scale_rows_kernel, blocks_for(n, kThreads), kThreads, 0, instance.stream, values,
                                   scales, n, width);
  check_launch("scale_rows");
}

}  // namespace strata::cuda
