// ABI 1.5's normed inputs (matmul_normed, route_experts_normed) as the ops they stand for, one after another:
// add (into the input's sum, or the backend's scratch; without y a copy of x into its sum), rms_norm (into its
// normed, or the backend's scratch), then the op on the norm. The same floats as the core's path through
// add_rms_norm; a CPU gains nothing by fusing.
#include <cstring>
#include <string>

#include "backend_objects.hpp"
#include "ops.hpp"

namespace strata::cpu {
namespace {

// The norm of in's rows x width (checked by sdk::normed_operands), in the backend's scratch where the input
// gives no buffer for it (kept between ops: a prompt's rows would otherwise be allocated for every projection).
const strata_buffer* normalize(strata_backend* backend, const strata_normed_input* in, int32_t rows, int32_t width) {
  auto& instance = deref(backend, "backend");
  const int64_t n = int64_t{rows} * width;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  const strata_buffer* x = in->x;
  if (in->y != nullptr) {
    strata_buffer* sum = in->sum;
    if (sum == nullptr) {
      instance.normed_sum.reserve(bytes);
      sum = &instance.normed_sum;
    }
    add(backend, in->x, in->y, n, sum);
    x = sum;
  } else if (in->sum != nullptr) {
    std::memcpy(in->sum->base(), in->x->base(), bytes);
  }
  strata_buffer* normed = in->normed;
  if (normed == nullptr) {
    instance.normed_rows.reserve(bytes);
    normed = &instance.normed_rows;
  }
  rms_norm(backend, x, in->weight, rows, width, in->eps, normed);
  return normed;
}

}  // namespace

void matmul_normed(strata_backend* backend, const strata_weight* w, const strata_normed_input* in, int32_t n_tokens,
                   const strata_weight* bias, strata_buffer* out) {
  const auto& weight = deref(w, "matmul_normed weight");
  const std::string what = "matmul_normed " + weight.name;
  sdk::normed_operands<strata_buffer>(in, n_tokens, static_cast<int32_t>(weight.ne0), what);
  sdk::check_normed_output(in, out, what);
  matmul(backend, w, 0, normalize(backend, in, n_tokens, static_cast<int32_t>(weight.ne0)), n_tokens, bias, out);
}

void route_experts_normed(strata_backend* backend, const strata_normed_input* in, const strata_weight* router,
                          int32_t n_tokens, int32_t n_experts, int32_t n_used, int32_t routing, strata_buffer* logits,
                          strata_buffer* ids, strata_buffer* weights) {
  const auto& weight = deref(router, "route_experts_normed router");
  sdk::normed_operands<strata_buffer>(in, n_tokens, static_cast<int32_t>(weight.ne0), "route_experts_normed");
  for (const strata_buffer* output : {logits, ids, weights})
    sdk::check_normed_output(in, output, "route_experts_normed");
  route_experts(backend, normalize(backend, in, n_tokens, static_cast<int32_t>(weight.ne0)), router, n_tokens,
                n_experts, n_used, routing, logits, ids, weights);
}

}  // namespace strata::cpu
