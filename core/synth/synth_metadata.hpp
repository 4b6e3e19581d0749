// The metadata keys of a synthetic model, as llama.cpp writes them for the arch, plus a tokenizer and
// strata.synth.* keys recording how the file was made.
#pragma once

#include <cstdint>

#include "core/gguf/gguf_writer.hpp"
#include "core/synth/model_shape.hpp"
#include "core/synth/quant_mix.hpp"
#include "core/synth/synth_vocab.hpp"

namespace strata::synth {

struct Provenance {
  uint64_t seed = 0;
  float routing_skew = 0.0f;
};

void write_metadata(gguf::Writer& writer, const ModelShape& shape, QuantMix mix, const SynthVocab& vocab,
                    const Provenance& provenance);

}  // namespace strata::synth
