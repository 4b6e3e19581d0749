// ABI 1.5's normed inputs (matmul_normed, route_experts_normed) as the ops they stand for, one after another:
// add (into the input's sum, or a scratch buffer; without y a copy of x into its sum), rms_norm (into its
// normed, or a scratch buffer), then the op on the norm. The same floats as the core's path through add_rms_norm; a CPU gains nothing by fusing.
#include <cstring>
#include <memory>
#include <string>

#include "backend_objects.hpp"
#include "ops.hpp"

namespace strata::cpu {
namespace {

// The norm of in's rows x width (checked by sdk::normed_operands); buffers the input does not give are made
// in scratch and live as long.
class NormedRows {
 public:
  NormedRows(strata_backend* backend, const strata_normed_input* in, int32_t rows, int32_t width) {
    const int64_t n = int64_t{rows} * width;
    const strata_buffer* x = in->x;
    if (in->y != nullptr) {
      strata_buffer* sum = in->sum != nullptr ? in->sum : scratch(backend, n, sum_scratch_);
      add(backend, in->x, in->y, n, sum);
      x = sum;
    } else if (in->sum != nullptr) {
      std::memcpy(in->sum->base(), in->x->base(), static_cast<size_t>(n) * sizeof(float));
    }
    normed_ = in->normed != nullptr ? in->normed : scratch(backend, n, normed_scratch_);
    rms_norm(backend, x, in->weight, rows, width, in->eps, normed_);
  }
  const strata_buffer* get() const { return normed_; }

 private:
  static strata_buffer* scratch(strata_backend* backend, int64_t n, std::unique_ptr<strata_buffer>& owned) {
    strata_buffer* buffer = nullptr;
    buffer_alloc(backend, static_cast<size_t>(n) * sizeof(float), &buffer);
    owned.reset(buffer);
    return buffer;
  }

  std::unique_ptr<strata_buffer> sum_scratch_, normed_scratch_;
  strata_buffer* normed_ = nullptr;
};

}  // namespace

void matmul_normed(strata_backend* backend, const strata_weight* w, const strata_normed_input* in, int32_t n_tokens,
                   const strata_weight* bias, strata_buffer* out) {
  const auto& weight = deref(w, "matmul_normed weight");
  const std::string what = "matmul_normed " + weight.name;
  sdk::normed_operands<strata_buffer>(in, n_tokens, static_cast<int32_t>(weight.ne0), what);
  sdk::check_normed_output(in, out, what);
  const NormedRows rows(backend, in, n_tokens, static_cast<int32_t>(weight.ne0));
  matmul(backend, w, 0, rows.get(), n_tokens, bias, out);
}

void route_experts_normed(strata_backend* backend, const strata_normed_input* in, const strata_weight* router,
                          int32_t n_tokens, int32_t n_experts, int32_t n_used, int32_t routing, strata_buffer* logits,
                          strata_buffer* ids, strata_buffer* weights) {
  const auto& weight = deref(router, "route_experts_normed router");
  sdk::normed_operands<strata_buffer>(in, n_tokens, static_cast<int32_t>(weight.ne0), "route_experts_normed");
  for (const strata_buffer* output : {logits, ids, weights}) sdk::check_normed_output(in, output, "route_experts_normed");
  const NormedRows rows(backend, in, n_tokens, static_cast<int32_t>(weight.ne0));
  route_experts(backend, rows.get(), router, n_tokens, n_experts, n_used, routing, logits, ids, weights);
}

}  // namespace strata::cpu
