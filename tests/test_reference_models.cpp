// Against the peer engine's reference data: every tensor of every reference model has the type and shape
// the peer reports, and dequantizes, through the plugins of the default manifest, to the same float32
// values bit for bit (compared by SHA-256).
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/gguf/ggml_types.hpp"
#include "core/gguf/gguf_file.hpp"
#include "core/plugin/manifest.hpp"
#include "core/plugin/plugin_host.hpp"
#include "support/reference.hpp"

namespace strata {
namespace {

std::string sha256_hex(const void* data, size_t bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data, bytes, digest, &length, EVP_sha256(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

class ReferenceModel : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceModel, TensorsMatchThePeersTypesShapesAndDequantizedValues) {
  const auto model_path = test::reference_dir() / "models" / (GetParam() + ".gguf");
  const auto expected_path = test::reference_dir() / "dequant" / (GetParam() + ".json");
  ASSERT_REFERENCE(model_path);
  ASSERT_REFERENCE(expected_path);
  const auto expected = nlohmann::json::parse(std::ifstream(expected_path));
  const gguf::Model model(model_path);
  const auto plugins = PluginHost::open(load_manifest(test::default_manifest_path()));

  ASSERT_EQ(model.tensors().size(), expected.size());
  for (const auto& tensor : model.tensors()) {
    SCOPED_TRACE(GetParam() + ": " + tensor.name);
    ASSERT_TRUE(expected.contains(tensor.name));
    const auto& want = expected[tensor.name];
    EXPECT_EQ(std::string(gguf::find_type(tensor.type)->name), want["type"].get<std::string>());
    EXPECT_EQ(tensor.shape, want["shape"].get<std::vector<uint64_t>>());

    std::vector<float> values(tensor.n_elements);
    plugins->quants().dequantize(tensor.type, tensor.data, values.data(), static_cast<int64_t>(values.size()));
    EXPECT_EQ(sha256_hex(values.data(), values.size() * sizeof(float)), want["sha256_f32"].get<std::string>());
    const auto first = want["first"].get<std::vector<float>>();
    for (size_t i = 0; i < first.size() && i < values.size(); ++i) EXPECT_EQ(values[i], first[i]) << "value " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(All, ReferenceModel, ::testing::ValuesIn(test::reference_model_names()),
                         [](const auto& info) { return test::test_name(info.param); });

}  // namespace
}  // namespace strata
