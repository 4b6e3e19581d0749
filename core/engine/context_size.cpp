#include "core/engine/context_size.hpp"

#include <string>

#include "core/util/error.hpp"
#include "core/util/log.hpp"

namespace strata {

int32_t checked_context_size(const ModelConfig& config, int32_t requested) {
  if (requested < 1) throw Error("--ctx " + std::to_string(requested) + ": the context must hold at least 1 token");
  if (config.n_ctx_train <= 0 || requested <= config.n_ctx_train) return requested;
  log().warn("--ctx {} is above the model's context length of {} ({}.context_length): using {}", requested,
             config.n_ctx_train, config.architecture->name, config.n_ctx_train);
  return config.n_ctx_train;
}

}  // namespace strata
