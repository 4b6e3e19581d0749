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

// For the group of query heads sharing kv_head (consecutive heads, so q and out are group rows of
// head_dim): out_g = softmax(q_g . k_j * scale) over j <= position, times v_j. Each cached row is read once
// for the whole group. scores holds group rows of n_ctx floats.
void attend_group(const strata_backend& backend, const strata_kv_cache& cache, const strata_attention_params& params,
                  int32_t position, int32_t kv_head, int32_t group, const float* q, float* scores, float* out) {
  const FloatKernels& kernels = backend.kernels;
  const size_t first_row = cache.row(params.layer, kv_head, 0);
  const int32_t n_seen = position + 1;
  const size_t head_dim = static_cast<size_t>(params.head_dim), scores_stride = static_cast<size_t>(cache.config.n_ctx);
  cache.keys.dot_rows(kernels, first_row, n_seen, q, head_dim, group, scores, scores_stride);
  for (int32_t g = 0; g < group; ++g) kernels.scaled_softmax(scores + g * scores_stride, n_seen, params.scale);
  std::fill(out, out + group * head_dim, 0.0f);
  cache.values.accumulate_rows(kernels, first_row, n_seen, scores, scores_stride, out, head_dim, group);
}

}  // namespace

void attention(strata_backend* backend, strata_kv_cache* cache, const strata_attention_params* params,
               const strata_buffer* q, const strata_buffer* k, const strata_buffer* v, strata_buffer* out) {
  auto& instance = deref(backend, "backend");
  auto& kv = deref(cache, "kv cache");
  const auto& p = deref(params, "attention params");
  const sdk::AttentionOperands operands = sdk::attention_operands(kv.config, p, q, k, v, out);
  const int64_t n_tokens = p.n_tokens, head_dim = p.head_dim;
  const int64_t q_width = p.n_head * head_dim, kv_width = p.n_head_kv * head_dim;

  instance.pool.parallel_for(n_tokens * p.n_head_kv, [&](int64_t begin, int64_t end, int) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / p.n_head_kv, kv_head = item % p.n_head_kv;
      const size_t row = kv.row(p.layer, static_cast<int32_t>(kv_head), p.positions[t]);
      kv.keys.store(instance.kernels, row, operands.k + t * kv_width + kv_head * head_dim);
      kv.values.store(instance.kernels, row, operands.v + t * kv_width + kv_head * head_dim);
    }
  });
  const int32_t group = p.n_head / p.n_head_kv;
  // A prompt's later tokens attend over more positions: items are taken from both ends of the tokens in turn
  // (0, n - 1, 1, n - 2, ...), so that the pool's chunks of items in a row get about equal work.
  const auto token_of = [n_tokens](int64_t k) { return k % 2 == 0 ? k / 2 : n_tokens - 1 - k / 2; };
  instance.pool.parallel_for(n_tokens * p.n_head_kv, [&](int64_t begin, int64_t end, int worker) {
    float* scores = instance.worker_floats(worker, static_cast<size_t>(group) * kv.config.n_ctx);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = token_of(item / p.n_head_kv), kv_head = item % p.n_head_kv;
      const int64_t offset = t * q_width + kv_head * group * head_dim;
      attend_group(instance, kv, p, p.positions[t], static_cast<int32_t>(kv_head), group, operands.q + offset, scores,
                   operands.out + offset);
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
