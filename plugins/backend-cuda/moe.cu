// The grouped expert FFN, three ways, each summing a token's experts in its own choice order.
// Decode (a few tokens, types with an expert launcher): two launches read the chosen experts' rows straight
// from the router's ids on the device, gate and up with SwiGLU in one, down with the weighted sum in the
// other; nothing waits for the host, so a decode step can be captured in a CUDA graph.
// Prompts (types with a grouped GEMM): one kernel groups the (token, choice) slots by expert on the
// device, and gate, up and down are one tensor-core launch each over all experts' tiles of tokens.
// Otherwise (a plugin without those launchers): the ids come to the host, which groups the slots, and
// each used expert multiplies its tokens' rows with the backend's matmul.
// A pair of weight 0 adds nothing (strata/backend.h): both grouped paths leave it out (an expert cache's core
// zeroes the pairs another tier computes, whatever their ids); the decode launches compute it (0 x a finite
// result adds 0), so its id must still be in range there.
#include <cuda_fp16.h>

#include <algorithm>
#include <cub/block/block_scan.cuh>
#include <numeric>
#include <string>
#include <vector>

#include "activation_functions.cuh"
#include "backend_objects.hpp"
#include "cuda_status.hpp"
#include "f16_packing.cuh"
#include "matmul.hpp"
#include "ops.hpp"
#include "strata/cuda/launch.cuh"

namespace strata::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGroupedExperts = 4096;  // a counter each in the grouping kernel's shared memory

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

// out[t] = sum over j in choice order of weights[t][j] * down_out[position of slot t * n_used + j], 4 columns
// per thread (rows of a multiple of 4 values, 16-byte aligned: the multiplies before it need 8). A slot without
// a position adds nothing where its weight is 0 (it was left out), else NaN (its id was out of range).
__global__ void combine_kernel(const float* down_out, const int32_t* position_of, const float* weights, int n_used,
                               int width, float* out, int n_quads) {
  sdk::cuda::start_after_previous_kernel();
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n_quads) return;
  const int quads_per_row = width / 4, token = i / quads_per_row, quad = i - token * quads_per_row;
  float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int j = 0; j < n_used; ++j) {
    const int slot = token * n_used + j;
    const int32_t position = position_of[slot];
    const float weight = weights[slot];
    if (position < 0) {
      if (weight == 0.0f) continue;
      // An expert id out of range (device grouping) has no position: NaN, not a wrong read.
      const float nan = __int_as_float(0x7fc00000);
      sum = make_float4(nan, nan, nan, nan);
      continue;
    }
    const auto* row = reinterpret_cast<const float4*>(down_out) + static_cast<int64_t>(position) * quads_per_row;
    const float4 value = row[quad];
    sum.x += weight * value.x;
    sum.y += weight * value.y;
    sum.z += weight * value.z;
    sum.w += weight * value.w;
  }
  reinterpret_cast<float4*>(out)[i] = sum;
}

void weighted_sum_of_choices(strata_backend& backend, const float* down_out, const int32_t* position_of,
                             const float* weights, int32_t n_tokens, int32_t n_used, int64_t width, float* out) {
  if (width % 4 != 0 || !sdk::cuda::is_16_byte_aligned(down_out) || !sdk::cuda::is_16_byte_aligned(out)) {
    invalid_argument("moe_ffn: rows of the weighted sum not whole, 16-byte aligned float4s");
  }
  const auto n_quads = static_cast<int>(n_tokens * width / 4);
  sdk::cuda::launch_after_previous(combine_kernel, blocks_for(n_quads, kThreads), kThreads, 0, backend.stream, down_out,
                                   position_of, weights, n_used, static_cast<int>(width), out, n_quads);
  check_launch("moe combine");
}

// The slots grouped by expert: slot_at[position], position_of[slot] (-1 for a slot of weight 0, left out), and
// each expert's first position.
struct Grouping {
  std::vector<int32_t> slot_at, position_of;
  std::vector<int64_t> first_of_expert;
};

Grouping group_by_expert(const std::vector<int32_t>& expert_of_slot, const std::vector<float>& weight_of_slot,
                         int64_t n_experts, const std::string& name) {
  Grouping grouping;
  const auto n_slots = static_cast<int64_t>(expert_of_slot.size());
  grouping.first_of_expert.assign(n_experts + 1, 0);
  for (int64_t slot = 0; slot < n_slots; ++slot) {
    const int32_t expert = expert_of_slot[slot];
    if (weight_of_slot[slot] == 0.0f) continue;
    if (expert < 0 || expert >= n_experts) {
      invalid_argument("moe_ffn: expert id " + std::to_string(expert) + " is outside the " + std::to_string(n_experts) +
                       " experts of " + name);
    }
    ++grouping.first_of_expert[expert + 1];
  }
  std::partial_sum(grouping.first_of_expert.begin(), grouping.first_of_expert.end(), grouping.first_of_expert.begin());
  grouping.slot_at.resize(grouping.first_of_expert.back());
  grouping.position_of.assign(n_slots, -1);
  std::vector<int64_t> next(grouping.first_of_expert.begin(), grouping.first_of_expert.end() - 1);
  for (int64_t slot = 0; slot < n_slots; ++slot) {
    if (weight_of_slot[slot] == 0.0f) continue;
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

// Slots grouped by expert on the device: position_of[slot] (-1 for a slot whose id is out of range or whose
// weight is 0: it adds nothing, and no tile computes it) and tiles of up to 64 positions of one expert, in
// expert order. The order of slots within an expert is arbitrary: a slot's products do not depend on its
// position. One block: counts by shared-memory atomics, then each thread takes kExpertsPerGroupThread
// consecutive experts, and two block-wide prefix sums give their first positions and first tiles (one thread
// walking every expert made this the longest of the glue kernels around the GEMMs).
constexpr int kGroupThreads = 1024;
constexpr int kExpertsPerGroupThread = static_cast<int>(kMaxGroupedExperts / kGroupThreads);
static_assert(kMaxGroupedExperts % kGroupThreads == 0);

__global__ void __launch_bounds__(kGroupThreads)
    group_kernel(const int32_t* ids, const float* weights, int n_slots, int n_experts, int32_t* position_of,
                 int32_t* tiles, int32_t* tile_count) {
  sdk::cuda::start_after_previous_kernel();
  using Scan = cub::BlockScan<int, kGroupThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ int32_t next[kMaxGroupedExperts];  // each expert's count, then its next free position
  for (int e = threadIdx.x; e < n_experts; e += blockDim.x) next[e] = 0;
  __syncthreads();
  const auto grouped = [&](int slot, int e) { return e >= 0 && e < n_experts && weights[slot] != 0.0f; };
  for (int s = threadIdx.x; s < n_slots; s += blockDim.x) {
    const int e = ids[s];
    if (grouped(s, e)) atomicAdd(&next[e], 1);
  }
  __syncthreads();

  const int first_expert = threadIdx.x * kExpertsPerGroupThread;
  int counts[kExpertsPerGroupThread], my_slots = 0, my_tiles = 0;
#pragma unroll
  for (int k = 0; k < kExpertsPerGroupThread; ++k) {
    counts[k] = first_expert + k < n_experts ? next[first_expert + k] : 0;
    my_slots += counts[k];
    my_tiles += (counts[k] + STRATA_GEMM_TILE_TOKENS - 1) / STRATA_GEMM_TILE_TOKENS;
  }
  int position = 0, tile = 0, n_tiles = 0;
  Scan(scan_storage).ExclusiveSum(my_slots, position);
  __syncthreads();  // the scans share their storage
  Scan(scan_storage).ExclusiveSum(my_tiles, tile, n_tiles);
#pragma unroll
  for (int k = 0; k < kExpertsPerGroupThread; ++k) {
    if (first_expert + k >= n_experts) break;
    next[first_expert + k] = position;
    for (int p = 0; p < counts[k]; p += STRATA_GEMM_TILE_TOKENS, ++tile) {
      tiles[3 * tile] = first_expert + k;
      tiles[3 * tile + 1] = position + p;
      tiles[3 * tile + 2] = min(STRATA_GEMM_TILE_TOKENS, counts[k] - p);
    }
    position += counts[k];
  }
  if (threadIdx.x == 0) *tile_count = n_tiles;
  __syncthreads();
  for (int s = threadIdx.x; s < n_slots; s += blockDim.x) {
    const int e = ids[s];
    position_of[s] = grouped(s, e) ? atomicAdd(&next[e], 1) : -1;
  }
}

// grouped[position of each of a token's slots] = x[token] as f16, 8 values per thread (rows of a multiple of
// 8 values, 16-byte aligned): each token's row is read and rounded once for all its choices. Positions
// without a slot (as many as slots left out, at the end) are left as they are: no tile covers them. 32-bit
// indices: one 64-bit division per element made a gather like this 4x slower than the copy it is.
__global__ void gather_f16_kernel(const float* x, const int32_t* position_of, int n_used, int width, __half* grouped,
                                  int n_eights) {
  sdk::cuda::start_after_previous_kernel();
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n_eights) return;
  const int eights_per_row = width / 8, token = i / eights_per_row, eight = i - token * eights_per_row;
  const auto* values = reinterpret_cast<const float4*>(x) + 2 * static_cast<int64_t>(i);
  const uint4 halves = eight_halves(values[0], values[1]);
  for (int j = 0; j < n_used; ++j) {
    const int position = position_of[token * n_used + j];
    if (position >= 0) {
      reinterpret_cast<uint4*>(grouped)[static_cast<int64_t>(position) * eights_per_row + eight] = halves;
    }
  }
}

// out = silu(gate) * up as f16, 8 values per thread (a multiple of 8 values, 16-byte aligned).
__global__ void swiglu_f16_kernel(const float* gate, const float* up, __half* out, int64_t n_eights) {
  sdk::cuda::start_after_previous_kernel();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n_eights) return;
  const auto* gates = reinterpret_cast<const float4*>(gate) + 2 * i;
  const auto* ups = reinterpret_cast<const float4*>(up) + 2 * i;
  const float4 g0 = gates[0], g1 = gates[1], u0 = ups[0], u1 = ups[1];
  reinterpret_cast<uint4*>(out)[i] =
      eight_halves(make_float4(silu(g0.x) * u0.x, silu(g0.y) * u0.y, silu(g0.z) * u0.z, silu(g0.w) * u0.w),
                   make_float4(silu(g1.x) * u1.x, silu(g1.y) * u1.y, silu(g1.z) * u1.z, silu(g1.w) * u1.w));
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
  const auto max_tiles =
      static_cast<int32_t>(n_experts + (n_slots + STRATA_GEMM_TILE_TOKENS - 1) / STRATA_GEMM_TILE_TOKENS);
  int32_t* position_of = backend.lane().moe_slots.get<int32_t>(backend.budget, n_slots + 3 * max_tiles + 1);
  int32_t* tiles = position_of + n_slots;
  int32_t* tile_count = tiles + 3 * max_tiles;
  sdk::cuda::launch_after_previous(group_kernel, 1, kGroupThreads, 0, backend.stream, ids, weights,
                                   static_cast<int>(n_slots), n_experts, position_of, tiles, tile_count);
  check_launch("moe group");

  // Scratch: f16 inputs, gate and up results, the f16 SwiGLU product, down results.
  const size_t half_values = static_cast<size_t>(n_slots * (width + ffn));
  auto* halves = backend.lane().activations_f16.get<__half>(backend.budget, half_values);
  __half* grouped_x = halves;
  __half* product = halves + n_slots * width;
  float* gate_out =
      backend.lane().moe_floats.get<float>(backend.budget, static_cast<size_t>(n_slots * (2 * ffn + width)));
  float* up_out = gate_out + n_slots * ffn;
  float* down_out = up_out + n_slots * ffn;

  if (!sdk::cuda::is_16_byte_aligned(x)) invalid_argument("moe_ffn: input rows not 16-byte aligned");
  sdk::cuda::launch_after_previous(gather_f16_kernel, blocks_for(n_tokens * width / 8, kThreads), kThreads, 0,
                                   backend.stream, x, position_of, n_used, static_cast<int>(width), grouped_x,
                                   static_cast<int>(n_tokens * width / 8));
  check_launch("moe gather");
  grouped_gemm(backend, gate, tiles, tile_count, max_tiles, grouped_x, gate_out);
  grouped_gemm(backend, up, tiles, tile_count, max_tiles, grouped_x, up_out);
  sdk::cuda::launch_after_previous(swiglu_f16_kernel, blocks_for(n_slots * ffn / 8, kThreads), kThreads, 0,
                                   backend.stream, gate_out, up_out, product, n_slots * ffn / 8);
  check_launch("moe swiglu");
  grouped_gemm(backend, down, tiles, tile_count, max_tiles, product, down_out);
  weighted_sum_of_choices(backend, down_out, position_of, weights, n_tokens, n_used, width, out);
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
             const strata_buffer* ids, const strata_buffer* weights, const strata_weight* gate, const strata_weight* up,
             const strata_weight* down, strata_buffer* out) {
  auto& instance = deref(backend, "backend");
  const auto& gate_weight = deref(gate, "moe_ffn gate");
  const auto& up_weight = deref(up, "moe_ffn up");
  const auto& down_weight = deref(down, "moe_ffn down");
  for (const strata_weight* weight : {&gate_weight, &up_weight, &down_weight}) {
    instance.weight_writes.await(weight->written, instance.stream);
  }
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
  std::vector<float> weight_of_slot(n_slots);
  check(cudaMemcpyAsync(expert_of_slot.data(), id_values, n_slots * sizeof(int32_t), cudaMemcpyDeviceToHost,
                        instance.stream),
        "moe_ffn: reading the expert ids");
  check(cudaMemcpyAsync(weight_of_slot.data(), weight_values, n_slots * sizeof(float), cudaMemcpyDeviceToHost,
                        instance.stream),
        "moe_ffn: reading the expert weights");
  check(cudaStreamSynchronize(instance.stream), "moe_ffn: waiting for the router");
  const Grouping grouping = group_by_expert(expert_of_slot, weight_of_slot, gate_weight.ne2, gate_weight.name);
  const auto n_grouped = static_cast<int64_t>(grouping.slot_at.size());

  int32_t* slot_indices = instance.lane().moe_slots.get<int32_t>(instance.budget, n_grouped + n_slots);
  const int32_t* slot_at = slot_indices;
  const int32_t* position_of = slot_indices + n_grouped;
  check(cudaMemcpyAsync(slot_indices + n_grouped, grouping.position_of.data(), n_slots * sizeof(int32_t),
                        cudaMemcpyHostToDevice, instance.stream),
        "moe_ffn: copying the grouping");
  // Scratch rows in grouped order: inputs, gate (then the SwiGLU product), up, down results.
  float* grouped_x = instance.lane().moe_floats.get<float>(
      instance.budget, static_cast<size_t>(std::max<int64_t>(n_grouped, 1) * (2 * width + 2 * ffn)));
  float* gate_out = grouped_x + n_grouped * width;
  float* up_out = gate_out + n_grouped * ffn;
  float* down_out = up_out + n_grouped * ffn;
  if (n_grouped > 0) {  // else every pair has weight 0, and the sum is zeros
    check(cudaMemcpyAsync(slot_indices, grouping.slot_at.data(), n_grouped * sizeof(int32_t), cudaMemcpyHostToDevice,
                          instance.stream),
          "moe_ffn: copying the grouping");
    sdk::cuda::launch_after_previous(gather_kernel, blocks_for(n_grouped * width, kThreads), kThreads, 0,
                                     instance.stream, x_values, slot_at, n_used, width, grouped_x, n_grouped * width);
    check_launch("moe gather");
    multiply_groups(instance, gate_weight, grouping, grouped_x, gate_out);
    multiply_groups(instance, up_weight, grouping, grouped_x, up_out);
    sdk::cuda::launch_after_previous(swiglu_kernel, blocks_for(n_grouped * ffn, kThreads), kThreads, 0, instance.stream,
                                     gate_out, up_out, n_grouped * ffn);
    check_launch("moe swiglu");
    multiply_groups(instance, down_weight, grouping, gate_out, down_out);
  }
  weighted_sum_of_choices(instance, down_out, position_of, weight_values, n_tokens, n_used, width, out_values);
}

}  // namespace strata::cuda
