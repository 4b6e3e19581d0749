// The k-quant block codecs Q4_K, Q5_K and Q6_K as a quant plugin.
#include "strata/plugin.hpp"
#include "q4_k.hpp"
#include "q5_k.hpp"
#include "q6_k.hpp"

using strata::quant_k::Q4KCodec;
using strata::quant_k::Q5KCodec;
using strata::quant_k::Q6KCodec;

STRATA_QUANT_PLUGIN("quant-k", "1.0.0", Q4KCodec, Q5KCodec, Q6KCodec)
