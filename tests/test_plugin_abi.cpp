// The plugin ABI's helpers: STRATA_HAS_FIELD reads a struct as the minor its struct_size says.
#include <gtest/gtest.h>

#include "strata/quant.h"

namespace {

TEST(PluginAbi, HasFieldFollowsStructSize) {
  strata_quant_type type{};
  type.struct_size = STRATA_FIELD_END(strata_quant_type, cpu_dot_rows_multi);  // a type built for ABI 1.0
  EXPECT_TRUE(STRATA_HAS_FIELD(&type, dequantize));
  EXPECT_TRUE(STRATA_HAS_FIELD(&type, cpu_dot_rows_multi));
  EXPECT_FALSE(STRATA_HAS_FIELD(&type, cuda_expert_matvec));
  EXPECT_FALSE(STRATA_HAS_FIELD(&type, cuda_repack));
  type.struct_size = STRATA_FIELD_END(strata_quant_type, cuda_expert_matvec) - 1;  // the field's last byte missing
  EXPECT_FALSE(STRATA_HAS_FIELD(&type, cuda_expert_matvec));
  type.struct_size = sizeof type;
  EXPECT_TRUE(STRATA_HAS_FIELD(&type, cuda_repack));
}

}  // namespace
