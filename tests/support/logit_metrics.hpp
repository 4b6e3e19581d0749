// How far one set of logits is from another: the measure of tests/reference/README.md.
#pragma once

#include <filesystem>
#include <span>
#include <vector>

namespace strata::test {

struct LogitDistance {
  double mean_kl = 0.0;  // mean over positions of KL(softmax(reference) || softmax(candidate))
  double top1 = 0.0;     // fraction of positions whose argmax agrees
};

LogitDistance logit_distance(std::span<const float> reference, std::span<const float> candidate, size_t n_vocab);

std::vector<float> read_f32(const std::filesystem::path& path);

}  // namespace strata::test
