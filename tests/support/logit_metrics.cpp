#include "support/logit_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

namespace strata::test {
namespace {

std::vector<double> log_softmax(std::span<const float> row) {
  const double max = *std::max_element(row.begin(), row.end());
  double sum = 0.0;
  for (const float value : row) sum += std::exp(value - max);
  const double log_sum = std::log(sum) + max;
  std::vector<double> out(row.size());
  for (size_t i = 0; i < row.size(); ++i) out[i] = row[i] - log_sum;
  return out;
}

}  // namespace

LogitDistance logit_distance(std::span<const float> reference, std::span<const float> candidate, size_t n_vocab) {
  if (reference.size() != candidate.size() || reference.size() % n_vocab != 0 || reference.empty()) {
    throw std::invalid_argument("logit arrays differ in size or are not whole rows");
  }
  const size_t rows = reference.size() / n_vocab;
  LogitDistance distance;
  for (size_t r = 0; r < rows; ++r) {
    const auto p = reference.subspan(r * n_vocab, n_vocab);
    const auto q = candidate.subspan(r * n_vocab, n_vocab);
    const auto log_p = log_softmax(p);
    const auto log_q = log_softmax(q);
    double kl = 0.0;
    for (size_t i = 0; i < n_vocab; ++i) kl += std::exp(log_p[i]) * (log_p[i] - log_q[i]);
    distance.mean_kl += kl;
    const auto argmax = [](std::span<const float> row) {
      return std::max_element(row.begin(), row.end()) - row.begin();
    };
    distance.top1 += argmax(p) == argmax(q) ? 1.0 : 0.0;
  }
  distance.mean_kl /= static_cast<double>(rows);
  distance.top1 /= static_cast<double>(rows);
  return distance;
}

std::vector<float> read_f32(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  const auto bytes = static_cast<size_t>(in.tellg());
  std::vector<float> values(bytes / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
  return values;
}

}  // namespace strata::test
