// Causal grouped-query attention over one sequence's cache: this step's keys and values are stored at
// their positions first, then every (token, head) pair attends over cache positions 0..position.
#include <algorithm>
#include <cmath>
#include <string>

#include "backend_objects.hpp"
#include "kv_cache.hpp"
#include "ops.hpp"

namespace strata::cpu {
namespace {

// Tokens attended together: each cached key and value row is read once for all their query heads of a kv head
// (the dot and axpy kernels take up to 8 vectors a pass: 2 tokens of a group of 4 heads).
constexpr int64_t kTokensTogether = 2;

// For the query heads sharing kv_head (consecutive heads, group of them) of count tokens from first: out_g =
// softmax(q_g . k_j * scale) over j <= the token's position, times v_j. The tokens' queries are gathered into
// queries ([count * group][head_dim]); scores holds count * group rows of n_ctx floats, sums as many rows of
// head_dim. A token that sees fewer positions than the others gets weight 0 for the rest (adding 0 x v_j leaves
// its sums as they were).
void attend_tokens(const strata_backend& backend, const strata_kv_cache& cache, const strata_attention_params& params,
                   const sdk::AttentionOperands& operands, int64_t first, int64_t count, int32_t kv_head, int32_t group,
                   float* queries, float* scores, float* sums) {
  const FloatKernels& kernels = backend.kernels;
  const size_t first_row = cache.row(params.layer, kv_head, 0);
  const size_t head_dim = static_cast<size_t>(params.head_dim), scores_stride = static_cast<size_t>(cache.config.n_ctx);
  const int64_t q_width = int64_t{params.n_head} * params.head_dim, block = int64_t{group} * params.head_dim;
  const auto vectors = static_cast<int32_t>(count * group);
  int32_t n_seen = 0;
  for (int64_t t = first; t < first + count; ++t) {
    std::copy_n(operands.q + t * q_width + kv_head * block, block, queries + (t - first) * block);
    n_seen = std::max(n_seen, params.positions[t] + 1);
  }
  cache.keys.dot_rows(kernels, first_row, n_seen, queries, head_dim, vectors, scores, scores_stride);
  for (int64_t t = first; t < first + count; ++t) {
    const int32_t own = params.positions[t] + 1;
    for (int32_t g = 0; g < group; ++g) {
      float* row = scores + ((t - first) * group + g) * scores_stride;
      kernels.scaled_softmax(row, own, params.scale);
      std::fill(row + own, row + n_seen, 0.0f);
    }
  }
  std::fill(sums, sums + vectors * head_dim, 0.0f);
  cache.values.accumulate_rows(kernels, first_row, n_seen, scores, scores_stride, sums, head_dim, vectors);
  for (int64_t t = first; t < first + count; ++t) {
    std::copy_n(sums + (t - first) * block, block, operands.out + t * q_width + kv_head * block);
  }
}

}  // namespace

void attention(strata_backend* backend, strata_kv_cache* cache, const strata_attention_params* params,
               const strata_buffer* q, const strata_buffer* k, const strata_buffer* v, strata_buffer* out) {
  auto& instance = deref(backend, "backend");
  auto& kv = deref(cache, "kv cache");
  const auto& p = deref(params, "attention params");
  const sdk::AttentionOperands operands = sdk::attention_operands(kv.config, p, q, k, v, out);
  const int64_t n_tokens = p.n_tokens, head_dim = p.head_dim;
  const int64_t kv_width = p.n_head_kv * head_dim;

  instance.pool.parallel_for(n_tokens * p.n_head_kv, [&](int64_t begin, int64_t end, int) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / p.n_head_kv, kv_head = item % p.n_head_kv;
      const size_t row = kv.row(p.layer, static_cast<int32_t>(kv_head), p.positions[t]);
      kv.keys.store(instance.kernels, row, operands.k + t * kv_width + kv_head * head_dim);
      kv.values.store(instance.kernels, row, operands.v + t * kv_width + kv_head * head_dim);
    }
  });
  const int32_t group = p.n_head / p.n_head_kv;
  const int64_t n_units = (n_tokens + kTokensTogether - 1) / kTokensTogether;  // runs of tokens attended together
  // A prompt's later tokens attend over more positions: units are taken from both ends in turn (0, n - 1, 1,
  // n - 2, ...), so that the pool's chunks of items in a row get about equal work.
  const auto unit_of = [n_units](int64_t k) { return k % 2 == 0 ? k / 2 : n_units - 1 - k / 2; };
  const auto vectors = static_cast<size_t>(kTokensTogether * group), dims = static_cast<size_t>(head_dim);
  instance.pool.parallel_for(n_units * p.n_head_kv, [&](int64_t begin, int64_t end, int worker) {
    float* scratch = instance.worker_floats(worker, vectors * (kv.config.n_ctx + 2 * dims));
    float* queries = scratch + vectors * kv.config.n_ctx;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t first = unit_of(item / p.n_head_kv) * kTokensTogether;
      attend_tokens(instance, kv, p, operands, first, std::min(kTokensTogether, n_tokens - first),
                    static_cast<int32_t>(item % p.n_head_kv), group, queries, scratch, queries + vectors * dims);
    }
  });
}

// attention with q and k prepared first: on the CPU the norms and rope run as the separate ops would.
void attention_rope(strata_backend* backend, strata_kv_cache* cache, const strata_attention_params* params,
                    const strata_qk_prepare* prepare, strata_buffer* q, strata_buffer* k, const strata_buffer* v,
                    strata_buffer* out) {
  const auto& p = deref(params, "attention params");
  const auto& r = sdk::checked_qk_prepare(prepare, p);
  sdk::attention_operands(deref(cache, "kv cache").config, p, q, k, v, out);  // checked before q and k change
  if (r.q_norm != nullptr) rms_norm(backend, q, r.q_norm, p.n_tokens * p.n_head, p.head_dim, r.norm_eps, q);
  if (r.k_norm != nullptr) rms_norm(backend, k, r.k_norm, p.n_tokens * p.n_head_kv, p.head_dim, r.norm_eps, k);
  rope_neox(backend, q, p.positions, p.n_tokens, p.n_head, p.head_dim, r.n_rot, r.rope_base);
  rope_neox(backend, k, p.positions, p.n_tokens, p.n_head_kv, p.head_dim, r.n_rot, r.rope_base);
  attention(backend, cache, params, q, k, v, out);
}

}  // namespace strata::cpu
