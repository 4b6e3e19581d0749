// The NaN/infinity checks of float arrays (every step's logits, weights in inspect --check): a value in any
// lane or in the tail past the last whole group of lanes is found.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "core/util/finite_values.hpp"

namespace strata {
namespace {

TEST(FiniteValues, EveryPositionOfEverySizeIsChecked) {
  const float kBad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()};
  for (size_t size = 0; size <= 40; ++size) {
    std::vector<float> values(size, -0.0f);
    for (size_t i = 0; i < size; ++i) values[i] = static_cast<float>(i) - 20.5f;
    EXPECT_TRUE(all_finite(values)) << size;
    EXPECT_FALSE(first_non_finite(values).has_value()) << size;
    for (size_t at = 0; at < size; ++at) {
      for (const float bad : kBad) {
        std::vector<float> with_bad = values;
        with_bad[at] = bad;
        EXPECT_FALSE(all_finite(with_bad)) << "size " << size << ", at " << at << ", " << bad;
        EXPECT_EQ(first_non_finite(with_bad), at) << "size " << size << ", " << bad;
      }
    }
  }
  EXPECT_STREQ(non_finite_name(kBad[0]), "NaN");
  EXPECT_STREQ(non_finite_name(kBad[1]), "+inf");
  EXPECT_STREQ(non_finite_name(kBad[2]), "-inf");
}

}  // namespace
}  // namespace strata
