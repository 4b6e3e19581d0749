// The plugin's one exported symbol: a quant plugin offering Q4_0 and Q4_1.
#include "strata/plugin.hpp"
#include "q4_codecs.hpp"

STRATA_QUANT_PLUGIN("quant-q4_0", "1.0.0", quant_q4::Q4_0Codec, quant_q4::Q4_1Codec)
