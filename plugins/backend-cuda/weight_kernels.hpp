// The kernels a weight's type offers on the GPU (quant.h's launcher signatures): the backend's own for
// the core's types F32, F16, BF16 and Q8_0, the quant plugin's for every other type. dequantize_f16 and
// matvec are required; expert_matvec and grouped_gemm (ABI 1.1), matvec_q8 (ABI 1.2, which also says
// that expert_matvec reads rounded input) and matvec_normed (ABI 1.5) are optional.
#pragma once

#include "strata/quant.h"

namespace strata::cuda {

inline constexpr uint32_t kTypeF32 = 0, kTypeF16 = 1, kTypeBF16 = 30;

struct WeightKernels {
  decltype(strata_quant_type::cuda_dequantize_f16) dequantize_f16 = nullptr;
  decltype(strata_quant_type::cuda_matvec) matvec = nullptr;
  decltype(strata_quant_type::cuda_expert_matvec) expert_matvec = nullptr;
  decltype(strata_quant_type::cuda_grouped_gemm) grouped_gemm = nullptr;
  decltype(strata_quant_type::cuda_matvec_q8) matvec_q8 = nullptr;
  decltype(strata_quant_type::cuda_matvec_normed) matvec_normed = nullptr;

  bool available() const { return dequantize_f16 != nullptr && matvec != nullptr; }
};

WeightKernels weight_kernels(const strata_quant_type& type);

}  // namespace strata::cuda
