// The quant-iq3 plugin: IQ3_XXS and IQ3_S block codecs.
#include "strata/plugin.hpp"
#include "iq3_s.hpp"
#include "iq3_xxs.hpp"

STRATA_QUANT_PLUGIN("quant-iq3", "1.0.0", strata::iq3::Iq3XxsCodec, strata::iq3::Iq3SCodec)
