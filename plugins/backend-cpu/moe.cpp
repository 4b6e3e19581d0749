// The router (softmax, top-k; with its product: route_experts) and the grouped expert FFN.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "backend_objects.hpp"
#include "matmul.hpp"
#include "ops.hpp"

namespace strata::cpu {
namespace {

// The row-wise steps around the expert products (gathering inputs, SwiGLU, the weighted sum) take a thread per
// this many rows at least: a decode step's few rows cost less than waking a thread.
constexpr int64_t kRowsPerThread = 8;

// probabilities = softmax(logits), max-subtracted, in float.
void softmax(const float* logits, int32_t n, float* probabilities) {
  const float max_logit = *std::max_element(logits, logits + n);
  float sum = 0.0f;
  for (int32_t i = 0; i < n; ++i) {
    probabilities[i] = std::exp(logits[i] - max_logit);
    sum += probabilities[i];
  }
  for (int32_t i = 0; i < n; ++i) probabilities[i] /= sum;
}

}  // namespace

void route(strata_backend* backend, const strata_buffer* logits, int32_t n_tokens, int32_t n_experts, int32_t n_used,
           int32_t routing, strata_buffer* ids, strata_buffer* weights) {
  auto& instance = deref(backend, "backend");
  const sdk::RouteOperands operands = sdk::route_operands(logits, n_tokens, n_experts, n_used, routing, ids, weights);

  instance.pool.parallel_for(n_tokens, [&](int64_t begin, int64_t end, int worker) {
    float* probabilities = instance.worker_floats(worker, static_cast<size_t>(n_experts));
    std::vector<int32_t> order(n_experts);  // expert indices being ranked
    for (int64_t t = begin; t < end; ++t) {
      softmax(operands.logits + t * n_experts, n_experts, probabilities);
      std::iota(order.begin(), order.end(), 0);
      // Best first; equal probabilities keep the lower expert index first.
      std::partial_sort(order.begin(), order.begin() + n_used, order.end(), [&](int32_t a, int32_t b) {
        return probabilities[a] > probabilities[b] || (probabilities[a] == probabilities[b] && a < b);
      });
      float chosen_sum = 0.0f;
      for (int32_t j = 0; j < n_used; ++j) chosen_sum += probabilities[order[j]];
      const float normalizer = routing == STRATA_ROUTING_SOFTMAX_TOPK_NORM ? 1.0f / chosen_sum : 1.0f;
      for (int32_t j = 0; j < n_used; ++j) {
        operands.ids[t * n_used + j] = order[j];
        operands.weights[t * n_used + j] = probabilities[order[j]] * normalizer;
      }
    }
  });
}

// The router's product and the choice, as the two ops do them: the same floats as the core's fallback.
void route_experts(strata_backend* backend, const strata_buffer* x, const strata_weight* router, int32_t n_tokens,
                   int32_t n_experts, int32_t n_used, int32_t routing, strata_buffer* logits, strata_buffer* ids,
                   strata_buffer* weights) {
  sdk::check_router(deref(router, "route_experts router"), n_experts);
  matmul(backend, router, 0, x, n_tokens, nullptr, logits);
  route(backend, logits, n_tokens, n_experts, n_used, routing, ids, weights);
}

void moe_ffn(strata_backend* backend, const strata_buffer* x, int32_t n_tokens, int32_t n_used,
             const strata_buffer* ids, const strata_buffer* weights, const strata_weight* gate, const strata_weight* up,
             const strata_weight* down, strata_buffer* out) {
  auto& instance = deref(backend, "backend");
  const auto& gate_weight = deref(gate, "moe_ffn gate");
  const auto& up_weight = deref(up, "moe_ffn up");
  const auto& down_weight = deref(down, "moe_ffn down");
  const sdk::MoeOperands operands =
      sdk::moe_operands(gate_weight, up_weight, down_weight, x, n_tokens, n_used, ids, weights, out);
  const int64_t width = operands.width, ffn = operands.ffn, n_experts = gate_weight.ne2, n_slots = operands.n_slots;
  const float* x_values = operands.x;
  const int32_t* id_values = operands.ids;
  const float* weight_values = operands.weights;
  float* out_values = operands.out;

  // Group the slots by expert (a counting sort keeps each expert's slots in token order), so each
  // expert's weights are read once for all its tokens. A slot of weight 0 adds nothing and is left out: the
  // core gives a pair to another tier (an expert cache) that way.
  std::vector<int64_t>& first_of_expert = instance.moe_offsets;
  first_of_expert.assign(n_experts + 1, 0);
  for (int64_t slot = 0; slot < n_slots; ++slot) {
    const int32_t expert = id_values[slot];
    if (expert < 0 || expert >= n_experts) {
      invalid_argument("moe_ffn: expert id " + std::to_string(expert) + " is outside the " + std::to_string(n_experts) +
                       " experts of " + gate_weight.name);
    }
    if (weight_values[slot] != 0.0f) ++first_of_expert[expert + 1];
  }
  std::partial_sum(first_of_expert.begin(), first_of_expert.end(), first_of_expert.begin());
  const int64_t n_computed = first_of_expert[n_experts];
  instance.moe_slots.resize(n_computed);
  std::vector<int64_t>& next = instance.moe_next;
  next.assign(first_of_expert.begin(), first_of_expert.end());
  std::vector<int64_t>& position_of_slot = instance.moe_positions;
  position_of_slot.assign(n_slots, -1);
  for (int64_t slot = 0; slot < n_slots; ++slot) {
    if (weight_values[slot] == 0.0f) continue;
    const int64_t position = next[id_values[slot]]++;
    instance.moe_slots[position] = static_cast<int32_t>(slot);
    position_of_slot[slot] = position;
  }

  const auto tokens_of = [&](int64_t expert) { return first_of_expert[expert + 1] - first_of_expert[expert]; };

  // The gate and up products read each expert's tokens in place (MatmulTask::x_rows), so a prompt's rows are
  // converted once for the int8 kernel whatever experts they chose. An expert with one token gets that token's
  // row as its input: the experts of one token then share its converted row (a decode step converts one row for
  // all its experts). Scratch rows in grouped order: gate (then the SwiGLU product), up, down results.
  instance.moe_tokens.resize(n_computed);
  for (int64_t position = 0; position < n_computed; ++position) {
    instance.moe_tokens[position] = static_cast<int32_t>(instance.moe_slots[position] / n_used);
  }
  instance.moe_floats.resize(static_cast<size_t>(n_computed * (2 * ffn + width)));
  float* gate_out = instance.moe_floats.data();
  float* up_out = gate_out + n_computed * ffn;
  float* down_out = up_out + n_computed * ffn;

  // Kept between calls, as the instance's scratch is: a decode step allocates nothing.
  thread_local std::vector<MatmulTask> tasks;
  tasks.clear();
  for (int64_t expert = 0; expert < n_experts; ++expert) {
    const int64_t first = first_of_expert[expert], count = tokens_of(expert);
    if (count == 0) continue;
    const int32_t* tokens = instance.moe_tokens.data() + first;
    MatmulTask task{&gate_weight, expert, x_values, count, gate_out + first * ffn, tokens, n_tokens};
    if (count == 1) task = {&gate_weight, expert, x_values + tokens[0] * width, 1, task.out, nullptr, 0};
    tasks.push_back(task);
    task.weight = &up_weight;
    task.out = up_out + first * ffn;
    tasks.push_back(task);
  }
  run_matmuls(instance, tasks);

  instance.pool.parallel_for(
      n_computed,
      [&](int64_t begin, int64_t end, int) {
        instance.kernels.swiglu(gate_out + begin * ffn, up_out + begin * ffn, (end - begin) * ffn);
      },
      kRowsPerThread);

  tasks.clear();
  for (int64_t expert = 0; expert < n_experts; ++expert) {
    const int64_t first = first_of_expert[expert], count = first_of_expert[expert + 1] - first;
    if (count > 0) tasks.push_back({&down_weight, expert, gate_out + first * ffn, count, down_out + first * width});
  }
  run_matmuls(instance, tasks);

  // Each token sums its experts in its own choice order: the result does not depend on the grouping
  // or the thread count.
  instance.pool.parallel_for(
      n_tokens,
      [&](int64_t begin, int64_t end, int) {
        for (int64_t t = begin; t < end; ++t) {
          float* row = out_values + t * width;
          std::fill(row, row + width, 0.0f);
          for (int64_t j = 0; j < n_used; ++j) {
            const int64_t slot = t * n_used + j;
            if (position_of_slot[slot] < 0) continue;
            instance.kernels.axpy(weight_values[slot], down_out + position_of_slot[slot] * width, row, width);
          }
        }
      },
      kRowsPerThread);
}

}  // namespace strata::cpu
