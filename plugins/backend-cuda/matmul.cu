// Weight x activation products. Up to kMaxMatvecTokens tokens: the type's matvec kernel decodes the stored
// blocks on the fly (the decode path is bound by reading the weights once). More tokens: the type's grouped
// GEMM decodes the weights into shared memory per tile of 64 tokens and multiplies on the tensor cores;
// F16 weights go to cuBLAS in place, F32 weights to a float GEMM, and a type without a grouped GEMM is
// decoded a tile of rows at a time to f16 for cuBLAS. All accumulate in float.
#include <cuda_fp16.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda_status.hpp"
#include "f16_packing.cuh"
#include "matmul.hpp"
#include "normed_input.hpp"
#include "ops.hpp"
#include "strata/cuda/launch.cuh"

namespace strata::cuda {
namespace {

// A decoded tile of at most this many bytes of f16 (a 2048-wide weight: 16384 rows).
constexpr size_t kTileBytes = size_t{64} << 20;
constexpr int kThreads = 256;

// 8 values per thread (a multiple of 8 values, 16-byte aligned).
__global__ void to_f16_kernel(const float* x, __half* out, int64_t n_eights) {
  sdk::cuda::start_after_previous_kernel();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n_eights) return;
  const auto* values = reinterpret_cast<const float4*>(x) + 2 * i;
  reinterpret_cast<uint4*>(out)[i] = eight_halves(values[0], values[1]);
}

__global__ void add_bias_kernel(float* out, const float* bias, int64_t n_tokens, int64_t width) {
  sdk::cuda::start_after_previous_kernel();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n_tokens * width) out[i] += bias[i % width];
}

// out rows [row0, row0 + n_rows) of every token, from f16 weight rows w (ne0 values each) and f16 x.
void gemm_f16(strata_backend& backend, const __half* w, const __half* x, int64_t ne0, int64_t ne1, int64_t row0,
              int64_t n_rows, int64_t n_tokens, float* out) {
  // Column-major view: out^T (n_rows x n_tokens, leading dimension ne1) = w^T x.
  const float one = 1.0f, zero = 0.0f;
  check(cublasGemmEx(backend.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n_rows), static_cast<int>(n_tokens),
                     static_cast<int>(ne0), &one, w, CUDA_R_16F, static_cast<int>(ne0), x, CUDA_R_16F,
                     static_cast<int>(ne0), &zero, out + row0, CUDA_R_32F, static_cast<int>(ne1), CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
}

void gemm_f32(strata_backend& backend, const float* w, const float* x, int64_t ne0, int64_t ne1, int64_t n_tokens,
              float* out) {
  const float one = 1.0f, zero = 0.0f;
  check(cublasSgemm(backend.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(ne1), static_cast<int>(n_tokens),
                    static_cast<int>(ne0), &one, w, static_cast<int>(ne0), x, static_cast<int>(ne0), &zero, out,
                    static_cast<int>(ne1)),
        "cublasSgemm");
}

void multiply_batch(strata_backend& backend, const strata_weight& weight, int64_t expert, const float* x,
                    int64_t n_tokens, float* out) {
  const int64_t ne0 = weight.ne0, ne1 = weight.ne1;
  const std::byte* matrix = weight.matrix(expert);
  if (weight.type->type_id == kTypeF32) {
    gemm_f32(backend, reinterpret_cast<const float*>(matrix), x, ne0, ne1, n_tokens, out);
    return;
  }
  __half* x16 = backend.lane().activations_f16.get<__half>(backend.budget, static_cast<size_t>(n_tokens * ne0));
  if (!sdk::cuda::is_16_byte_aligned(x)) invalid_argument("matmul: input rows not 16-byte aligned");
  sdk::cuda::launch_after_previous(to_f16_kernel, blocks_for(n_tokens * ne0 / 8, kThreads), kThreads, 0, backend.stream,
                                   x, x16, n_tokens * ne0 / 8);
  check_launch("to_f16");
  if (weight.type->type_id == kTypeF16) {
    gemm_f16(backend, reinterpret_cast<const __half*>(matrix), x16, ne0, ne1, 0, ne1, n_tokens, out);
    return;
  }
  if (weight.kernels.grouped_gemm != nullptr && ne0 % 32 == 0) {
    // The tiles of one expert's matrix; the count goes last.
    std::vector<int32_t> tiles;
    for (int64_t first = 0; first < n_tokens; first += STRATA_GEMM_TILE_TOKENS) {
      tiles.insert(tiles.end(), {static_cast<int32_t>(expert), static_cast<int32_t>(first),
                                 static_cast<int32_t>(std::min<int64_t>(STRATA_GEMM_TILE_TOKENS, n_tokens - first))});
    }
    const auto n_tiles = static_cast<int32_t>(tiles.size() / 3);
    tiles.push_back(n_tiles);
    const int32_t* device_tiles = backend.upload(backend.lane().gemm_tiles, tiles.data(), tiles.size());
    grouped_gemm(backend, weight, device_tiles, device_tiles + 3 * n_tiles, n_tiles, x16, out);
    return;
  }
  const int64_t tile_rows = std::clamp<int64_t>(static_cast<int64_t>(kTileBytes / (ne0 * sizeof(__half))), 1, ne1);
  auto* tile = backend.lane().weight_tile.get<__half>(backend.budget, static_cast<size_t>(tile_rows * ne0));
  const int64_t blocks_per_row = ne0 / weight.type->block_elements;
  for (int64_t row0 = 0; row0 < ne1; row0 += tile_rows) {
    const int64_t n_rows = std::min(tile_rows, ne1 - row0);
    check_call([&](strata_error* error) {
      return weight.kernels.dequantize_f16(matrix + row0 * weight.row_bytes, reinterpret_cast<uint16_t*>(tile),
                                           n_rows * blocks_per_row, backend.stream, error);
    });
    gemm_f16(backend, tile, x16, ne0, ne1, row0, n_rows, n_tokens, out);
  }
}

}  // namespace

void grouped_gemm(strata_backend& backend, const strata_weight& weight, const int32_t* tiles, const int32_t* tile_count,
                  int32_t max_tiles, const void* x_f16, float* out) {
  const strata_cuda_grouped_gemm args{sizeof(strata_cuda_grouped_gemm),
                                      weight.matrix(0),
                                      weight.ne0,
                                      weight.ne1,
                                      weight.row_bytes,
                                      weight.matrix_bytes(),
                                      static_cast<int32_t>(weight.ne2),
                                      max_tiles,
                                      tiles,
                                      tile_count,
                                      static_cast<const uint16_t*>(x_f16),
                                      out};
  check_call([&](strata_error* error) { return weight.kernels.grouped_gemm(&args, backend.stream, error); });
}

void multiply(strata_backend& backend, const strata_weight& weight, int64_t expert, const float* x, int64_t n_tokens,
              float* out) {
  if (n_tokens == 0) return;
  if (!weight.kernels.available()) {
    throw sdk::Failure(STRATA_E_UNSUPPORTED, "matmul " + weight.name + ": no CUDA kernels for type " +
                                                 weight.type->name + " (its quant plugin was built without CUDA)");
  }
  if (weight.ne0 % 8 != 0) {
    throw sdk::Failure(STRATA_E_UNSUPPORTED, "matmul " + weight.name + ": rows of " + std::to_string(weight.ne0) +
                                                 " values (a multiple of 8 is needed)");
  }
  if (n_tokens <= kMaxMatvecTokens) {
    check_call([&](strata_error* error) {
      return weight.kernels.matvec(weight.matrix(expert), weight.ne0, weight.ne1, weight.row_bytes, x, n_tokens, out,
                                   backend.stream, error);
    });
  } else {
    multiply_batch(backend, weight, expert, x, n_tokens, out);
  }
}

namespace {

// out[t] += bias for n_tokens rows of width, where there is a bias.
void add_bias(strata_backend& backend, const float* bias, int64_t width, int32_t n_tokens, float* out) {
  if (bias == nullptr || n_tokens == 0) return;
  sdk::cuda::launch_after_previous(add_bias_kernel, blocks_for(n_tokens * width, kThreads), kThreads, 0, backend.stream,
                                   out, bias, n_tokens, width);
  check_launch("add_bias");
}

// The decode matvec on x's 8-bit copy, where the norm that wrote x left one and the type takes it; false
// otherwise (a format without 8-bit kernels declines), and the float activations go in.
bool multiply_rounded(strata_backend& backend, const strata_weight& weight, int32_t expert, const strata_buffer& x,
                      int32_t n_tokens, float* out) {
  if (n_tokens < 1 || n_tokens > kMaxMatvecTokens || weight.kernels.matvec_q8 == nullptr ||
      !x.has_rounded(n_tokens, weight.ne0)) {
    return false;
  }
  char message[512] = "";
  strata_error error{message, sizeof message};
  const strata_status status =
      weight.kernels.matvec_q8(weight.matrix(expert), weight.ne0, weight.ne1, weight.row_bytes, x.rounded_levels(),
                               x.rounded_scales(), n_tokens, out, backend.stream, &error);
  if (status == STRATA_E_UNSUPPORTED) return false;
  if (status != STRATA_OK) throw sdk::Failure(status, "matmul " + weight.name + ": " + message);
  return true;
}

// The products of a matmul whose input is x (the buffer, for its 8-bit copy) on the current lane, then the bias.
void multiply_then_bias(strata_backend& backend, const strata_weight& weight, int32_t expert, const strata_buffer& x,
                        const float* x_values, int32_t n_tokens, const float* bias, float* out) {
  if (!multiply_rounded(backend, weight, expert, x, n_tokens, out))
    multiply(backend, weight, expert, x_values, n_tokens, out);
  add_bias(backend, bias, weight.ne1, n_tokens, out);
}

// The decode matvec that normalizes its input in every block (strata_quant_type::cuda_matvec_normed), where the
// type has it and takes the call; false otherwise (the norm then runs first). An input that asks for its norm's
// rows runs the norm kernel, which writes them.
bool multiply_normed(strata_backend& backend, const strata_weight& weight, const NormedInput& input, int32_t n_tokens,
                     float* out) {
  if (n_tokens < 1 || n_tokens > kMaxMatvecTokens || weight.kernels.matvec_normed == nullptr ||
      input.normed != nullptr) {
    return false;
  }
  const strata_cuda_normed_rows rows{
      sizeof(strata_cuda_normed_rows), input.rows.x, input.rows.y, input.gain, input.eps, input.rows.sum};
  char message[512] = "";
  strata_error error{message, sizeof message};
  const strata_status status = weight.kernels.matvec_normed(weight.matrix(0), weight.ne0, weight.ne1, weight.row_bytes,
                                                            &rows, n_tokens, out, backend.stream, &error);
  if (status == STRATA_E_UNSUPPORTED) return false;
  if (status != STRATA_OK) throw sdk::Failure(status, "matmul_normed " + weight.name + ": " + message);
  return true;
}

}  // namespace

void matmul(strata_backend* backend, const strata_weight* w, int32_t expert, const strata_buffer* x, int32_t n_tokens,
            const strata_weight* bias, strata_buffer* out) {
  auto& instance = deref(backend, "backend");
  instance.take_next_lane();
  const auto& weight = deref(w, "matmul weight");
  instance.weight_writes.await(weight.written, instance.stream);
  const sdk::MatmulOperands operands = sdk::matmul_operands(weight, expert, x, n_tokens, out);
  const float* bias_values = bias != nullptr ? f32_vector(bias, weight.ne1, "matmul bias") : nullptr;
  multiply_then_bias(instance, weight, expert, *x, operands.x, n_tokens, bias_values, operands.out);
}

void matmul_normed(strata_backend* backend, const strata_weight* w, const strata_normed_input* in, int32_t n_tokens,
                   const strata_weight* bias, strata_buffer* out) {
  auto& instance = deref(backend, "backend");
  instance.take_next_lane();
  const auto& weight = deref(w, "matmul_normed weight");
  instance.weight_writes.await(weight.written, instance.stream);
  const NormedInput input =
      normed_input(in, n_tokens, static_cast<int32_t>(weight.ne0), "matmul_normed " + weight.name);
  sdk::check_normed_output(in, out, "matmul_normed " + weight.name);
  float* out_values = floats(out, n_tokens * weight.ne1, "matmul_normed out");
  const float* bias_values = bias != nullptr ? f32_vector(bias, weight.ne1, "matmul_normed bias") : nullptr;
  if (n_tokens == 0) return;
  if (multiply_normed(instance, weight, input, n_tokens, out_values)) {
    add_bias(instance, bias_values, weight.ne1, n_tokens, out_values);
    return;
  }
  const strata_buffer& rows = normalize_first(instance, input, n_tokens, static_cast<int32_t>(weight.ne0));
  multiply_then_bias(instance, weight, 0, rows, static_cast<const float*>(rows.base()), n_tokens, bias_values,
                     out_values);
}

}  // namespace strata::cuda
