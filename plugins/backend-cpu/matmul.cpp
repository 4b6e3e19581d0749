// Weights stay where the host mapped them. A type with a CPU dot kernel gets each activation row converted
// once to the kernel's activation type; any other type is dequantized a tile of rows at a time into the
// worker's scratch and multiplied in float. Many tokens of a type that decodes rows to int8 take the int8
// kernel where the CPU has it (int8_gemm.hpp): Q8_K activations re-laid out once, each tile decoded once.
// Either way a tile of weight rows meets every token before the next tile is read, so each weight byte
// comes from memory once per call.
#include "matmul.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "int8_gemm.hpp"
#include "ops.hpp"

namespace strata::cpu {
namespace {

using CpuDotRowsMultiFn = decltype(strata_quant_type::cpu_dot_rows_multi);
constexpr uint32_t kTypeQ8K = 15;

// Rows per tile: the tile's floats (4 rows of a 2048-wide weight, 32 KiB) stay in L1 while all tokens pass
// over them (twice as fast at 64 tokens as an L2-sized tile), and a 2048-row weight splits into 512 tiles.
constexpr int64_t kTileFloats = 8192;
// Activation rows converted per thread at least: a decode step's one or two rows are not worth a fork-join.
constexpr int64_t kConvertRowsPerThread = 4;

struct TaskPlan {
  MatmulTask task;
  bool use_dot_rows = false;
  CpuDotRowsMultiFn dot_rows_multi = nullptr;
  const strata_quant_type* activation_type = nullptr;  // set when activations must be converted
  size_t activation_row_bytes = 0;
  size_t activation_offset = 0;        // into backend.activations
  int64_t shares_activations_of = -1;  // an earlier plan whose converted activations this one reuses
  bool converts_x_rows = false;        // activations hold all x_row_count rows of x (an int8 plan with
                                       // x_rows: its interleaving picks its tokens from them)
  int8::RowDecoders int8_decoders;     // to_int8 set when the int8 kernel multiplies this task
  size_t interleaved_offset = 0;       // into backend.interleaved
  int64_t shares_interleaved_of = -1;  // likewise for the int8 kernel's activations
  int64_t tile_rows = 0;
  int64_t n_tiles = 0;
};

// The type's multi-token kernel, when its plugin is new enough to have the field and fills it.
CpuDotRowsMultiFn multi_token_kernel(const strata_quant_type& type) {
  return STRATA_HAS_FIELD(&type, cpu_dot_rows_multi) ? type.cpu_dot_rows_multi : nullptr;
}

// The type's int8 row decoders, when this task is worth the int8 kernel and this CPU runs it (none set else).
int8::RowDecoders int8_decoders(const strata_backend& backend, const TaskPlan& plan, const strata_quant_type* q8k) {
  const strata_weight& weight = *plan.task.weight;
  const strata_quant_type& type = *weight.type;
  if (!STRATA_HAS_FIELD(&type, cpu_rows_to_int8) || type.cpu_rows_to_int8 == nullptr) return {};
  if (!int8::available(backend.isa) || plan.task.n_tokens < int8::kMinTokens) return {};
  if (q8k == nullptr || q8k->quantize == nullptr || weight.ne0 % int8::kRowMultiple != 0) return {};
  return {type.cpu_rows_to_int8, STRATA_HAS_FIELD(&type, cpu_rows_int8_offsets) ? type.cpu_rows_int8_offsets : nullptr};
}

// The CPU dot kernel of a weight's type, when there is one whose activation type this backend can produce;
// or the int8 kernel, which reads Q8_K activations.
void choose_kernel(strata_backend& backend, TaskPlan& plan) {
  const strata_weight& weight = *plan.task.weight;
  const strata_quant_type& type = *weight.type;
  const strata_quant_type* q8k = backend.find_type(kTypeQ8K);
  plan.int8_decoders = int8_decoders(backend, plan, q8k);
  if (plan.int8_decoders.to_int8 != nullptr) {
    plan.activation_type = q8k;
    plan.activation_row_bytes = static_cast<size_t>(weight.ne0 / q8k->block_elements) * q8k->block_bytes;
    return;
  }
  if (!STRATA_HAS_FIELD(&type, cpu_dot_rows) || type.cpu_dot_rows == nullptr) return;
  if (type.cpu_activation_type == kTypeF32) {
    plan.use_dot_rows = true;
    plan.dot_rows_multi = multi_token_kernel(type);
    return;
  }
  const strata_quant_type* activation = backend.find_type(type.cpu_activation_type);
  if (activation == nullptr || activation->quantize == nullptr || weight.ne0 % activation->block_elements != 0) {
    return;  // the float fallback computes the same product
  }
  plan.use_dot_rows = true;
  plan.dot_rows_multi = multi_token_kernel(type);
  plan.activation_type = activation;
  plan.activation_row_bytes = static_cast<size_t>(weight.ne0 / activation->block_elements) * activation->block_bytes;
}

// Whether b's converted activations are a's: the same rows of the same x into the same type.
bool same_activations(const TaskPlan& a, const TaskPlan& b) {
  if (a.task.x != b.task.x || a.task.weight->ne0 != b.task.weight->ne0 || a.activation_type != b.activation_type ||
      a.converts_x_rows != b.converts_x_rows) {
    return false;
  }
  if (a.converts_x_rows) return a.task.x_row_count == b.task.x_row_count;
  return a.task.n_tokens == b.task.n_tokens && a.task.x_rows == b.task.x_rows;
}

// Whether b's int8 kernel activations are a's: the same activations, and the same tokens picked from them.
bool same_tokens(const TaskPlan& a, const TaskPlan& b) {
  return same_activations(a, b) && a.task.n_tokens == b.task.n_tokens && a.task.x_rows == b.task.x_rows;
}

// Rows of x a plan converts (none where it shares another's).
int64_t rows_to_convert(const TaskPlan& plan) {
  if (plan.activation_type == nullptr || plan.shares_activations_of >= 0) return 0;
  return plan.converts_x_rows ? plan.task.x_row_count : plan.task.n_tokens;
}

// Places the int8 kernel's activations of the int8 plans: an earlier plan's where it has the same.
size_t place_interleaved(std::vector<TaskPlan>& plans) {
  size_t bytes = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    TaskPlan& plan = plans[i];
    if (plan.int8_decoders.to_int8 == nullptr) continue;
    for (size_t j = 0; j < i && plan.shares_interleaved_of < 0; ++j) {
      if (plans[j].int8_decoders.to_int8 != nullptr && plans[j].shares_interleaved_of < 0 &&
          same_tokens(plans[j], plan)) {
        plan.shares_interleaved_of = static_cast<int64_t>(j);
        plan.interleaved_offset = plans[j].interleaved_offset;
      }
    }
    if (plan.shares_interleaved_of >= 0) continue;
    plan.interleaved_offset = bytes;
    bytes += int8::activation_bytes(plan.task.weight->ne0, plan.task.n_tokens);
  }
  return bytes;
}

// Into plans, kept by the caller between calls (steady-state steps allocate nothing).
void make_plans(strata_backend& backend, std::span<const MatmulTask> tasks, std::vector<TaskPlan>& plans) {
  plans.assign(tasks.size(), TaskPlan{});
  size_t activation_bytes = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    TaskPlan& plan = plans[i];
    plan.task = tasks[i];
    const strata_weight& weight = *plan.task.weight;
    choose_kernel(backend, plan);
    // The int8 kernel's gathers address the converted rows with int32 offsets.
    plan.converts_x_rows = plan.int8_decoders.to_int8 != nullptr && plan.task.x_rows != nullptr &&
                           plan.task.x_row_count * static_cast<int64_t>(plan.activation_row_bytes) <= INT32_MAX;
    plan.tile_rows = std::clamp<int64_t>(kTileFloats / weight.ne0 / 4 * 4, 4, 64);
    plan.n_tiles = (weight.ne1 + plan.tile_rows - 1) / plan.tile_rows;
    if (plan.activation_type == nullptr) continue;
    for (size_t j = 0; j < i; ++j) {
      if (plans[j].shares_activations_of < 0 && same_activations(plans[j], plan)) {
        plan.shares_activations_of = static_cast<int64_t>(j);
        plan.activation_offset = plans[j].activation_offset;
        break;
      }
    }
    if (plan.shares_activations_of >= 0) continue;
    plan.activation_offset = activation_bytes;
    activation_bytes += plan.activation_row_bytes * static_cast<size_t>(rows_to_convert(plan));
  }
  if (backend.activations.size() < activation_bytes) backend.activations.resize(activation_bytes);
  backend.interleaved.reserve(place_interleaved(plans));
}

// Calls fn(plan, local_begin, local_end) for each plan whose share of a flat index range [begin, end)
// is not empty; count(plan) is how many flat indices a plan owns, in plan order.
template <class Count, class Fn>
void for_each_share(std::vector<TaskPlan>& plans, int64_t begin, int64_t end, Count count, Fn fn) {
  int64_t first = 0;
  for (TaskPlan& plan : plans) {
    const int64_t last = first + count(plan);
    const int64_t from = std::max(begin, first), to = std::min(end, last);
    if (from < to) fn(plan, from - first, to - first);
    first = last;
  }
}

int64_t groups_to_interleave(const TaskPlan& plan) {
  if (plan.int8_decoders.to_int8 == nullptr || plan.shares_interleaved_of >= 0) return 0;
  return (plan.task.n_tokens + int8::kGroupTokens - 1) / int8::kGroupTokens;
}

// The int8 kernel's activations from the converted Q8_K rows, a group of tokens at a time.
void interleave_activations(strata_backend& backend, std::vector<TaskPlan>& plans) {
  int64_t total = 0;
  for (const TaskPlan& plan : plans) total += groups_to_interleave(plan);
  if (total == 0) return;
  backend.pool.parallel_for(total, [&](int64_t begin, int64_t end, int) {
    for_each_share(plans, begin, end, groups_to_interleave, [&](TaskPlan& plan, int64_t from, int64_t to) {
      for (int64_t group = from; group < to; ++group) {
        int8::interleave_group(plan.task.weight->ne0, backend.activations.data() + plan.activation_offset,
                               plan.activation_row_bytes, plan.converts_x_rows ? plan.task.x_rows : nullptr,
                               plan.task.n_tokens, group, backend.interleaved.base() + plan.interleaved_offset);
      }
    });
  });
}

void convert_activations(strata_backend& backend, std::vector<TaskPlan>& plans) {
  int64_t total = 0;
  for (const TaskPlan& plan : plans) total += rows_to_convert(plan);
  backend.pool.parallel_for(
      total,
      [&](int64_t begin, int64_t end, int) {
        for_each_share(plans, begin, end, rows_to_convert, [&](TaskPlan& plan, int64_t from, int64_t to) {
          const int64_t ne0 = plan.task.weight->ne0;
          std::byte* destination =
              backend.activations.data() + plan.activation_offset + from * plan.activation_row_bytes;
          const auto convert = [&](const float* rows, std::byte* into, int64_t count) {
            call_codec([&](strata_error* error) {
              return plan.activation_type->quantize(rows, into, count, ne0, nullptr, error);
            });
          };
          if (plan.task.x_rows == nullptr || plan.converts_x_rows) {
            convert(plan.task.x + from * ne0, destination, to - from);
            return;
          }
          for (int64_t t = from; t < to; ++t) {  // the task's tokens, gathered in order
            convert(plan.task.x + plan.task.x_rows[t] * ne0, destination + (t - from) * plan.activation_row_bytes, 1);
          }
        });
      },
      kConvertRowsPerThread);
}

// out[t][row0 + r] for the tile's rows through the type's dot kernel: all tokens in one call when the type
// has a multi-token kernel (each weight block decoded once for several tokens), else one call per token.
void tile_with_dot_rows(const strata_backend& backend, const TaskPlan& plan, const std::byte* rows, int64_t row0,
                        int64_t n_rows) {
  const MatmulTask& task = plan.task;
  const strata_weight& weight = *task.weight;
  const bool converted = plan.activation_type != nullptr;
  const std::byte* activations =
      converted ? backend.activations.data() + plan.activation_offset : reinterpret_cast<const std::byte*>(task.x);
  const size_t stride = converted ? plan.activation_row_bytes : static_cast<size_t>(weight.ne0) * sizeof(float);
  // Converted activations hold the task's tokens in order; floats read in place may be picked by x_rows.
  const bool picked = !converted && task.x_rows != nullptr;
  float* out = task.out + row0;
  if (plan.dot_rows_multi != nullptr && task.n_tokens > 1 && !picked) {
    plan.dot_rows_multi(weight.ne0, n_rows, rows, weight.row_bytes, activations, stride, task.n_tokens, out,
                        static_cast<size_t>(weight.ne1));
    return;
  }
  for (int64_t t = 0; t < task.n_tokens; ++t) {
    weight.type->cpu_dot_rows(weight.ne0, n_rows, rows, weight.row_bytes,
                              activations + (picked ? task.x_rows[t] : t) * stride, out + t * weight.ne1);
  }
}

// The same through float rows: F32 weights are read in place, other types dequantized into scratch.
void tile_in_float(strata_backend& backend, const TaskPlan& plan, const std::byte* rows, int64_t row0, int64_t n_rows,
                   int worker) {
  const MatmulTask& task = plan.task;
  const strata_weight& weight = *task.weight;
  const int64_t ne0 = weight.ne0;
  const float* w;
  if (weight.type->type_id == kTypeF32) {
    w = reinterpret_cast<const float*>(rows);
  } else {
    float* scratch = backend.worker_floats(worker, static_cast<size_t>(plan.tile_rows * ne0));
    call_codec([&](strata_error* error) {
      return weight.type->dequantize(rows, scratch, n_rows * ne0 / weight.type->block_elements, error);
    });
    w = scratch;
  }
  const FloatKernels& kernels = backend.kernels;
  for (int64_t t = 0; t < task.n_tokens; ++t) {
    const float* x = task.x + (task.x_rows != nullptr ? task.x_rows[t] : t) * ne0;
    float* out = task.out + t * weight.ne1 + row0;
    int64_t r = 0;
    for (; r + 4 <= n_rows; r += 4) kernels.dot4(w + r * ne0, static_cast<size_t>(ne0), x, ne0, out + r);
    for (; r < n_rows; ++r) out[r] = kernels.dot(w + r * ne0, x, ne0);
  }
}

}  // namespace

void run_matmuls(strata_backend& backend, std::span<const MatmulTask> tasks) {
  // The caller's own, by a reference the workers' chunks capture (a thread_local named in them would be theirs).
  thread_local std::vector<TaskPlan> kept_plans;
  std::vector<TaskPlan>& plans = kept_plans;
  make_plans(backend, tasks, plans);
  convert_activations(backend, plans);
  interleave_activations(backend, plans);
  int64_t total_tiles = 0;
  for (const TaskPlan& plan : plans) total_tiles += plan.n_tiles;
  const auto tiles = [](const TaskPlan& plan) { return plan.n_tiles; };
  backend.pool.parallel_for(total_tiles, [&](int64_t begin, int64_t end, int worker) {
    for_each_share(plans, begin, end, tiles, [&](TaskPlan& plan, int64_t from, int64_t to) {
      const strata_weight& weight = *plan.task.weight;
      for (int64_t tile = from; tile < to; ++tile) {
        const int64_t row0 = tile * plan.tile_rows;
        const int64_t n_rows = std::min(plan.tile_rows, weight.ne1 - row0);
        const std::byte* rows = weight.matrix(plan.task.expert) + row0 * weight.row_bytes;
        if (plan.int8_decoders.to_int8 != nullptr) {
          float* scratch = backend.worker_floats(worker, int8::tile_scratch_floats(weight.ne0, plan.tile_rows));
          int8::multiply_tile(plan.int8_decoders, weight.ne0, n_rows, rows, weight.row_bytes,
                              backend.interleaved.base() + plan.interleaved_offset, plan.task.n_tokens,
                              plan.task.out + row0, static_cast<size_t>(weight.ne1), scratch);
        } else if (plan.use_dot_rows) {
          tile_with_dot_rows(backend, plan, rows, row0, n_rows);
        } else {
          tile_in_float(backend, plan, rows, row0, n_rows, worker);
        }
      }
    });
  });
}

void matmul(strata_backend* backend, const strata_weight* w, int32_t expert, const strata_buffer* x, int32_t n_tokens,
            const strata_weight* bias, strata_buffer* out) {
  auto& instance = deref(backend, "backend");
  const auto& weight = deref(w, "matmul weight");
  const sdk::MatmulOperands operands = sdk::matmul_operands(weight, expert, x, n_tokens, out);
  const MatmulTask task{&weight, expert, operands.x, n_tokens, operands.out};
  const float* bias_values = bias != nullptr ? f32_vector(bias, weight.ne1, "matmul bias") : nullptr;
  run_matmuls(instance, {&task, 1});
  if (bias_values == nullptr) return;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t o = 0; o < weight.ne1; ++o) task.out[t * weight.ne1 + o] += bias_values[o];
  }
}

}  // namespace strata::cpu
