// The CUDA backend as a plugin. Without a usable CUDA device the probe says why and the host skips the
// plugin; with one it scores above the CPU backend.
#include <cuda_runtime.h>

#include <string>

#include "cuda_backend.hpp"
#include "ops.hpp"
#include "strata/plugin.hpp"

namespace {

constexpr int32_t kScoreWithDevice = 100;

strata_status probe(int32_t* score, strata_error* error) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    const std::string reason = status != cudaSuccess
                                   ? std::string("no usable CUDA device (") + cudaGetErrorString(status) + ")"
                                   : std::string("no CUDA device found");
    strata::sdk::write_error(error, reason.c_str());
    return STRATA_E_UNSUPPORTED;
  }
  *score = kScoreWithDevice;
  return STRATA_OK;
}

strata_status init(const strata_host_services*, const char* options_json, strata_error* error) {
  return strata::sdk::guarded(error, [&] { strata::cuda::set_plugin_options(options_json); });
}

}  // namespace

STRATA_PLUGIN_QUERY(::strata::sdk::make_descriptor(STRATA_PLUGIN_KIND_BACKEND, "backend-cuda", "1.0.0",
                                                   &::strata::cuda::cuda_backend_table(),
                                                   {.probe = &probe, .init = &init}))
