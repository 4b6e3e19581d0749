// A --ctx value (the positions a session's KV cache holds), checked against the model.
#pragma once

#include <cstdint>

#include "core/model/model_config.hpp"

namespace strata {

// Throws strata::Error below 1. A value above the model's context (ARCH.context_length) is lowered to it, with
// a warning, as llama.cpp warns there: positions past it are outside what the model was trained on, and this
// engine has no RoPE scaling to stretch it.
int32_t checked_context_size(const ModelConfig& config, int32_t requested);

}  // namespace strata
