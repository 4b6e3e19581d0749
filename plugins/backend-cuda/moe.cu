// The grouped expert FFN, three ways, each summing a token's experts in its own choice order.
// Decode (a few tokens, types with an expert launcher): two launches read the chosen experts' rows straight
// from the router's ids on the device, gate and up with SwiGLU in one, down with the weighted sum in the
// other; nothing waits for the host, so a decode step can be captured in a CUDA graph.
// Prompts (types with a grouped GEMM): one kernel groups the (token, choice) slots by expert on the
// device, and gate, up and down are one tensor-core launch each over all experts' tiles of tokens.
// Otherwise (a plugin without those launchers): the ids come to the host, which groups the slots, and
// each used expert multiplies its tokens' rows with the backend's matmul.
#include <cuda_fp16.h>

#include <numeric>
#include <string>
#include <vector>

#include "activation_functions.cuh"
#include "backend_objects.hpp"
#include "cuda_status.hpp"
#include "matmul.hpp"
#include "ops.hpp"
#include "strata/cuda_launch.cuh"

namespace strata::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGroupedExperts = 4096;  // two counters each in the grouping kernel's shared memory

// grouped[position] = x[token of the slot at position]; slot = token * n_used + choice.
__global__ void gather_kernel(const float* x, const int32_t* slot_at, int n_used, int64_t width, float* grouped,
                              int64_t n) {
  sdk::cuda::start_after_previous_kernel();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const int64_t position = i / width;
  grouped[i] = x[slot_at[position] / n_used * width + i % width];
}

__global__ void swiglu_kernel(float* gate, const float* up, int64_t n) {
  sdk::cuda::start_after_previous_kernel();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) gate[i] = silu(gate[i]) * up[i];
}

// out[t] = sum over j in choice order of weights[t][j] * down_out[position of slot t * n_used + j].
__global__ void combine_kernel(const float* down_out, const int32_t* position_of, const float* weights, int n_used,
                               int64_t width, float* out, int64_t n) {
  sdk::cuda::start_after_previous_kernel();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const int64_t token = i / width, column = i % width;
  float sum = 0.0f;
  for (int j = 0; j < n_used; ++j) {
    const int64_t slot = token * n_used + j;
    const int32_t position = position_of[slot];
    // A slot without a position had an expert id out of range (device grouping): NaN, not a wrong read.
    sum += position >= 0 ? weights[slot] * down_out[position * width + column] : __int_as_float(0x7fc00000);
  }
  out[i] = sum;
}

// The slots grouped by expert: slot_at[position], position_of[slot], and each expert's first position.
struct Grouping {
  std::vector<int32_t> slot_at, position_of;
  std::vector<int64_t> first_of_expert;
};

Grouping group_by_expert(const std::vector<int32_t>& expert_of_slot, int64_t n_experts, const std::string& name) {
  Grouping grouping;
  const auto n_slots = static_cast<int64_t>(expert_of_slot.size());
  grouping.first_of_expert.assign(n_experts + 1, 0);
  for (const int32_t expert : expert_of_slot) {
    if (expert < 0 || expert >= n_experts) {
      invalid_argument("moe_ffn: expert id " + std::to_string(expert) + " is outside the " +
                       std::to_string(n_experts) + " experts of " + name);
    }
    ++grouping.first_of_expert[expert + 1];
  }
  std::partial_sum(grouping.first_of_expert.begin(), grouping.first_of_expert.end(), grouping.first_of_expert.begin());
  grouping.slot_at.resize(n_slots);
  grouping.position_of.resize(n_slots);
  std::vector<int64_t> next(grouping.first_of_expert.begin(), grouping.first_of_expert.end() - 1);
  for (int64_t slot = 0; slot < n_slots; ++slot) {
    const int64_t position = next[expert_of_slot[slot]]++;
    grouping.slot_at[position] = static_cast<int32_t>(slot);
    grouping.position_of[slot] = static_cast<int32_t>(position);
  }
  return grouping;
}

// For each expert with tokens: out rows of its group = W[expert] x rows of its group.
void multiply_groups(strata_backend& backend, const strata_weight& weight, const Grouping& grouping, const float* x,
                     float* out) {
  const int64_t n_experts = static_cast<int64_t>(grouping.first_of_expert.size()) - 1;
  for (int64_t expert = 0; expert < n_experts; ++expert) {
    const int64_t first = grouping.first_of_expert[expert], count = grouping.first_of_expert[expert + 1] - first;
    if (count > 0) multiply(backend, weight, expert, x + first * weight.ne0, count, out + first * weight.ne1);
  }
}

// Slots grouped by expert on the device: position_of[slot], slot_at[position] (-1 for the positions of
// slots whose id is out of range, which get position -1), and tiles of up to 64 positions of one expert.
// The order of slots within an expert is arbitrary: a slot's products do not depend on its position.
__global__ void group_kernel(const int32_t* ids, int n_slots, int n_experts, int32_t* slot_at, int32_t* position_of,
                             int32_t* tiles, int32_t* tile_count) {
  sdk::cuda::start_after_previous_kernel();
  extern __shared__ int32_t per_expert[];  // counts, then the next free position
  int32_t* counts = per_expert;
  int32_t* next = per_expert + n_experts;
  for (int e = threadIdx.x; e < n_experts; e += blockDim.x) counts[e] = 0;
  for (int s = threadIdx.x; s < n_slots; s += blockDim.x) slot_at[s] = -1;
  __syncthreads();
  for (int s = threadIdx.x; s < n_slots; s += blockDim.x) {
    const int e = ids[s];
    if (e >= 0 && e < n_experts) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int position = 0, n_tiles = 0;
    for (int e = 0; e < n_experts; ++e) {
      next[e] = position;
      for (int p = 0; p < counts[e]; p += STRATA_GEMM_TILE_TOKENS, ++n_tiles) {
        tiles[3 * n_tiles] = e;
        tiles[3 * n_tiles + 1] = position + p;
        tiles[3 * n_tiles + 2] = min(STRATA_GEMM_TILE_TOKENS, counts[e] - p);
      }
      position += counts[e];
    }
    *tile_count = n_tiles;
  }
  __syncthreads();
  for (int s = threadIdx.x; s < n_slots; s += blockDim.x) {
    const int e = ids[s];
    const int position = e >= 0 && e < n_experts ? atomicAdd(&next[e], 1) : -1;
    if (position >= 0) slot_at[position] = s;
    position_of[s] = position;
  }
}

// grouped[position] = x[token of the slot at position] as f16 (zeros where no slot), 8 values per thread
// (rows of a multiple of 8 values, 16-byte aligned): one 64-bit division per element made this kernel 4x
// slower than the copy it is.
__global__ void gather_f16_kernel(const float* x, const int32_t* slot_at, int n_used, int width, __half* grouped,
                                  int n_eights) {
  sdk::cuda::start_after_previous_kernel();
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n_eights) return;
  const int eights_per_row = width / 8, position = i / eights_per_row, column = 8 * (i - position * eights_per_row);
  const int slot = slot_at[position];
  __align__(16) __half2 halves[4] = {};
  if (slot >= 0) {
    const auto* values = reinterpret_cast<const float4*>(x + static_cast<int64_t>(slot / n_used) * width + column);
    const float4 a = values[0], b = values[1];
    halves[0] = __floats2half2_rn(a.x, a.y), halves[1] = __floats2half2_rn(a.z, a.w);
    halves[2] = __floats2half2_rn(b.x, b.y), halves[3] = __floats2half2_rn(b.z, b.w);
  }
  reinterpret_cast<uint4*>(grouped)[i] = *reinterpret_cast<const uint4*>(halves);
}

__global__ void swiglu_f16_kernel(const float* gate, const float* up, __half* out, int64_t n) {
  sdk::cuda::start_after_previous_kernel();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(silu(gate[i]) * up[i]);
}

bool fits_grouped_gemm(const strata_weight& gate, const strata_weight& up, const strata_weight& down) {
  return gate.kernels.grouped_gemm != nullptr && up.kernels.grouped_gemm != nullptr &&
         down.kernels.grouped_gemm != nullptr && gate.ne0 % 32 == 0 && gate.ne1 % 32 == 0 &&
         gate.ne2 <= kMaxGroupedExperts;
}

void device_grouped(strata_backend& backend, const strata_weight& gate, const strata_weight& up,
                    const strata_weight& down, const float* x, int32_t n_tokens, int32_t n_used, const int32_t* ids,
                    const float* weights, float* out) {
  const int64_t n_slots = int64_t{n_tokens} * n_used, width = gate.ne0, ffn = gate.ne1;
  const auto n_experts = static_cast<int32_t>(gate.ne2);
  const auto max_tiles = static_cast<int32_t>(n_experts + (n_slots + STRATA_GEMM_TILE_TOKENS - 1) / STRATA_GEMM_TILE_TOKENS);
  int32_t* indices = backend.lane().moe_slots.get<int32_t>(backend.budget, 2 * n_slots + 3 * max_tiles + 1);
  int32_t* slot_at = indices;
  int32_t* position_of = indices + n_slots;
  int32_t* tiles = position_of + n_slots;
  int32_t* tile_count = tiles + 3 * max_tiles;
  const size_t shared_bytes = 2 * static_cast<size_t>(n_experts) * sizeof(int32_t);
  sdk::cuda::launch_after_previous(group_kernel, 1, 1024, shared_bytes, backend.stream, ids, static_cast<int>(n_slots),
                                   n_experts, slot_at, position_of, tiles, tile_count);
  check_launch("moe group");

  // Scratch: f16 inputs, gate and up results, the f16 SwiGLU product, down results.
  const size_t half_values = static_cast<size_t>(n_slots * (width + ffn));
  auto* halves = backend.lane().activations_f16.get<__half>(backend.budget, half_values);
  __half* grouped_x = halves;
  __half* product = halves + n_slots * width;
  float* gate_out = backend.lane().moe_floats.get<float>(backend.budget, static_cast<size_t>(n_slots * (2 * ffn + width)));
  float* up_out = gate_out + n_slots * ffn;
  float* down_out = up_out + n_slots * ffn;

  if (reinterpret_cast<uintptr_t>(x) % alignof(float4) != 0) invalid_argument("moe_ffn: input rows not 16-byte aligned");
  sdk::cuda::launch_after_previous(gather_f16_kernel, blocks_for(n_slots * width / 8, kThreads), kThreads, 0,
                                   backend.stream, x, slot_at, n_used, static_cast<int>(width), grouped_x,
                                   static_cast<int>(n_slots * width / 8));
  check_launch("moe gather");
  grouped_gemm(backend, gate, tiles, tile_count, max_tiles, grouped_x, gate_out);
  grouped_gemm(backend, up, tiles, tile_count, max_tiles, grouped_x, up_out);
  sdk::cuda::launch_after_previous(swiglu_f16_kernel, blocks_for(n_slots * ffn, kThreads), kThreads, 0, backend.stream,
                                   gate_out, up_out, product, n_slots * ffn);
  check_launch("moe swiglu");
  grouped_gemm(backend, down, tiles, tile_count, max_tiles, product, down_out);
  sdk::cuda::launch_after_previous(combine_kernel, blocks_for(n_tokens * width, kThreads), kThreads, 0, backend.stream,
                                   down_out, position_of, weights, n_used, width, out, n_tokens * width);
  check_launch("moe combine");
}

bool fits_expert_launches(const strata_weight& gate, const strata_weight& up, const strata_weight& down,
                          int32_t n_tokens) {
  return n_tokens <= kMaxMatvecTokens && gate.kernels.expert_matvec != nullptr &&
         down.kernels.expert_matvec != nullptr && gate.type == up.type;
}

// x_buffer's 8-bit copy goes to the gate/up launch where the norm that wrote it left one and the type's
// plugin reads it (ABI 1.2: it has cuda_matvec_q8).
void expert_launches(strata_backend& backend, const strata_weight& gate, const strata_weight& up,
                     const strata_weight& down, const strata_buffer& x_buffer, const float* x, int32_t n_tokens,
                     int32_t n_used, const int32_t* ids, const float* weights, float* out) {
  const int64_t n_slots = int64_t{n_tokens} * n_used;
  float* activations = backend.lane().moe_floats.get<float>(backend.budget, static_cast<size_t>(n_slots * gate.ne1));
  strata_cuda_expert_matvec gate_up{sizeof(strata_cuda_expert_matvec),
                                    STRATA_EXPERT_MATVEC_SWIGLU,
                                    gate.matrix(0),
                                    up.matrix(0),
                                    gate.ne0,
                                    gate.ne1,
                                    gate.row_bytes,
                                    gate.matrix_bytes(),
                                    static_cast<int32_t>(gate.ne2),
                                    static_cast<int32_t>(n_slots),
                                    n_used,
                                    ids,
                                    nullptr,
                                    x,
                                    activations,
                                    nullptr,
                                    nullptr};
  if (gate.kernels.matvec_q8 != nullptr && x_buffer.has_rounded(n_tokens, gate.ne0)) {
    gate_up.x_levels = x_buffer.rounded_levels();
    gate_up.x_scales = x_buffer.rounded_scales();
  }
  check_call([&](strata_error* error) { return gate.kernels.expert_matvec(&gate_up, backend.stream, error); });
  strata_cuda_expert_matvec combine = gate_up;
  combine.mode = STRATA_EXPERT_MATVEC_WEIGHTED_SUM;
  combine.weight = down.matrix(0);
  combine.weight2 = nullptr;
  combine.n = down.ne0;
  combine.n_rows = down.ne1;
  combine.row_bytes = down.row_bytes;
  combine.expert_bytes = down.matrix_bytes();
  combine.slot_weights = weights;
  combine.x = activations;
  combine.x_levels = nullptr;
  combine.x_scales = nullptr;
  combine.out = out;
  check_call([&](strata_error* error) { return down.kernels.expert_matvec(&combine, backend.stream, error); });
}

}  // namespace

void moe_ffn(strata_backend* backend, const strata_buffer* x, int32_t n_tokens, int32_t n_used,
             const strata_buffer* ids, const strata_buffer* weights, const strata_weight* gate,
             const strata_weight* up, const strata_weight* down, strata_buffer* out) {
  auto& instance = deref(backend, "backend");
  const auto& gate_weight = deref(gate, "moe_ffn gate");
  const auto& up_weight = deref(up, "moe_ffn up");
  const auto& down_weight = deref(down, "moe_ffn down");
  const sdk::MoeOperands operands =
      sdk::moe_operands(gate_weight, up_weight, down_weight, x, n_tokens, n_used, ids, weights, out);
  const int64_t width = operands.width, ffn = operands.ffn, n_slots = operands.n_slots;
  const float* x_values = operands.x;
  const int32_t* id_values = operands.ids;
  const float* weight_values = operands.weights;
  float* out_values = operands.out;
  if (n_tokens == 0) return;
  if (fits_expert_launches(gate_weight, up_weight, down_weight, n_tokens)) {
    expert_launches(instance, gate_weight, up_weight, down_weight, *x, x_values, n_tokens, n_used, id_values,
                    weight_values, out_values);
    return;
  }
  if (n_tokens > kMaxMatvecTokens && fits_grouped_gemm(gate_weight, up_weight, down_weight)) {
    device_grouped(instance, gate_weight, up_weight, down_weight, x_values, n_tokens, n_used, id_values, weight_values,
                   out_values);
    return;
  }

  std::vector<int32_t> expert_of_slot(n_slots);
  check(cudaMemcpyAsync(expert_of_slot.data(), id_values, n_slots * sizeof(int32_t), cudaMemcpyDeviceToHost,
                        instance.stream),
        "moe_ffn: reading the expert ids");
  check(cudaStreamSynchronize(instance.stream), "moe_ffn: waiting for the router");
  const Grouping grouping = group_by_expert(expert_of_slot, gate_weight.ne2, gate_weight.name);

  int32_t* slot_indices = instance.lane().moe_slots.get<int32_t>(instance.budget, 2 * n_slots);
  check(cudaMemcpyAsync(slot_indices, grouping.slot_at.data(), n_slots * sizeof(int32_t), cudaMemcpyHostToDevice,
                        instance.stream),
        "moe_ffn: copying the grouping");
  check(cudaMemcpyAsync(slot_indices + n_slots, grouping.position_of.data(), n_slots * sizeof(int32_t),
                        cudaMemcpyHostToDevice, instance.stream),
        "moe_ffn: copying the grouping");
  const int32_t* slot_at = slot_indices;
  const int32_t* position_of = slot_indices + n_slots;

  // Scratch rows in grouped order: inputs, gate (then the SwiGLU product), up, down results.
  float* grouped_x =
      instance.lane().moe_floats.get<float>(instance.budget, static_cast<size_t>(n_slots * (2 * width + 2 * ffn)));
  float* gate_out = grouped_x + n_slots * width;
  float* up_out = gate_out + n_slots * ffn;
  float* down_out = up_out + n_slots * ffn;

  sdk::cuda::launch_after_previous(gather_kernel, blocks_for(n_slots * width, kThreads), kThreads, 0, instance.stream,
                                   x_values, slot_at, n_used, width, grouped_x, n_slots * width);
  check_launch("moe gather");
  multiply_groups(instance, gate_weight, grouping, grouped_x, gate_out);
  multiply_groups(instance, up_weight, grouping, grouped_x, up_out);
  sdk::cuda::launch_after_previous(swiglu_kernel, blocks_for(n_slots * ffn, kThreads), kThreads, 0, instance.stream,
                                   gate_out, up_out, n_slots * ffn);
  check_launch("moe swiglu");
  multiply_groups(instance, down_weight, grouping, gate_out, down_out);
  sdk::cuda::launch_after_previous(combine_kernel, blocks_for(n_tokens * width, kThreads), kThreads, 0, instance.stream,
                                   down_out, position_of, weight_values, n_used, width, out_values, n_tokens * width);
  check_launch("moe combine");
}

}  // namespace strata::cuda
