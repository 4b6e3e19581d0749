// CUDA and cuBLAS failures as sdk::Failure, so that they cross the ABI as a status plus the CUDA message.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "strata/plugin.hpp"

namespace strata::cuda {

inline void check(cudaError_t status, const std::string& what) {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();  // clears a non-sticky error, so that the next op starts clean
  const strata_status code = status == cudaErrorMemoryAllocation ? STRATA_E_OUT_OF_MEMORY : STRATA_E_INTERNAL;
  throw sdk::Failure(code, what + ": " + cudaGetErrorString(status));
}

// After a kernel launch: a bad configuration shows up here, a fault in the kernel at the next sync.
inline void check_launch(const std::string& what) { check(cudaGetLastError(), what + " launch"); }

inline void check(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw sdk::Failure(status == CUBLAS_STATUS_ALLOC_FAILED ? STRATA_E_OUT_OF_MEMORY : STRATA_E_INTERNAL,
                     what + ": " + cublasGetStatusString(status));
}

// Calls a function of strata_quant_type (a launcher or the host dequantizer), which reports failure as a
// status plus message, and throws that failure.
template <class Call>
void check_call(Call&& call) {
  char message[256] = "";
  strata_error error{message, sizeof message};
  const strata_status status = call(&error);
  if (status != STRATA_OK) throw sdk::Failure(status, message);
}

}  // namespace strata::cuda
