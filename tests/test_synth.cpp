// strata synth: the files it writes open like real llama.cpp models (names, shapes, order, types and
// metadata checked against the reference models), are reproducible by seed, and the fast path and the
// routing-skew simulation do what they claim.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "core/gguf/ggml_types.hpp"
#include "core/gguf/gguf_file.hpp"
#include "core/gguf/gguf_json.hpp"
#include "core/plugin/manifest.hpp"
#include "core/plugin/plugin_host.hpp"
#include "core/synth/synth_model.hpp"
#include "core/synth/synth_vocab.hpp"
#include "core/synth/tensor_plan.hpp"
#include "core/synth/weight_generator.hpp"
#include "core/util/error.hpp"
#include "support/reference.hpp"

namespace strata {
namespace {

namespace t = gguf::type_id;
using synth::Arch;
using synth::QuantMix;

const PluginHost& plugins() {
  static const auto host = PluginHost::open(load_manifest(test::default_manifest_path()));
  return *host;
}

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("strata-test-synth-" + std::to_string(::getpid()) + "-" + name);
}

// A synthesized file, removed when the test ends.
struct SynthFile {
  std::filesystem::path path;
  synth::SynthReport report;
  SynthFile(const synth::SynthOptions& options, const std::string& name) : path(temp_path(name)) {
    report = synth::synthesize(options, plugins().quants(), path);
  }
  ~SynthFile() { std::filesystem::remove(path); }
  std::vector<uint8_t> bytes() const {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
};

synth::SynthOptions tiny(Arch arch, QuantMix mix, uint64_t seed = 1) {
  synth::SynthOptions options;
  options.shape = synth::preset_shape(arch, "tiny");
  options.mix = mix;
  options.seed = seed;
  options.threads = 2;
  return options;
}

std::vector<float> dequantize(const gguf::TensorInfo& tensor) {
  std::vector<float> values(tensor.n_elements);
  plugins().quants().dequantize(tensor.type, tensor.data, values.data(), static_cast<int64_t>(values.size()));
  return values;
}

double standard_deviation(const std::vector<float>& values) {
  double sum = 0, sum2 = 0;
  for (const float v : values) sum += v, sum2 += double(v) * v;
  const double mean = sum / values.size();
  return std::sqrt(sum2 / values.size() - mean * mean);
}

// ---------------------------------------------------------------------------------------------------------
// Every arch and type: the file opens, and matches a real llama.cpp file of the same arch.

struct ArchMix {
  Arch arch;
  QuantMix mix;
  const char* reference;  // a reference model with the same tensor set and, where one exists, the same mix
  bool same_mix;
};

class SynthTinyModel : public ::testing::TestWithParam<ArchMix> {};

TEST_P(SynthTinyModel, MatchesARealFilesTensorsAndMetadata) {
  const auto [arch, mix, reference_name, same_mix] = GetParam();
  const SynthFile file(tiny(arch, mix),
                       std::string(synth::arch_name(arch)) + "-" + std::string(synth::quant_mix_name(mix)));
  const gguf::Model model(file.path);
  const auto reference_path = test::reference_dir() / "models" / (std::string(reference_name) + ".gguf");
  ASSERT_REFERENCE(reference_path);
  const gguf::Model reference(reference_path);

  ASSERT_EQ(model.tensors().size(), reference.tensors().size());
  const uint64_t n_vocab = 512;
  for (size_t i = 0; i < model.tensors().size(); ++i) {
    const auto& ours = model.tensors()[i];
    const auto& theirs = reference.tensors()[i];
    SCOPED_TRACE(ours.name);
    EXPECT_EQ(ours.name, theirs.name);  // same order
    auto want_shape = theirs.shape;
    if (ours.name == "token_embd.weight" || ours.name == "output.weight") want_shape[1] = n_vocab;
    EXPECT_EQ(ours.shape, want_shape);
    if (same_mix) {
      EXPECT_EQ(gguf::find_type(ours.type)->name, gguf::find_type(theirs.type)->name);
    } else if (mix == QuantMix::f32) {
      EXPECT_EQ(ours.type, t::F32);
    }
    for (const float v : dequantize(ours)) ASSERT_TRUE(std::isfinite(v));
  }

  for (const auto& [key, value] : reference.metadata()) {
    if (key.starts_with("quantize.") || key == "general.name" || key.starts_with("tokenizer.")) continue;
    SCOPED_TRACE(key);
    const auto* ours = model.find(key);
    ASSERT_NE(ours, nullptr);
    EXPECT_EQ(ours->type(), value.type());
    if (key != "general.file_type" || same_mix) {
      EXPECT_EQ(gguf::to_json(*ours), gguf::to_json(value));
    }
  }
  for (const auto& [key, value] : reference.metadata()) {
    if (!key.starts_with("tokenizer.")) continue;
    SCOPED_TRACE(key);
    ASSERT_NE(model.find(key), nullptr);
    EXPECT_EQ(model.find(key)->type(), value.type());
  }
}

INSTANTIATE_TEST_SUITE_P(ArchAndType, SynthTinyModel,
                         ::testing::Values(ArchMix{Arch::qwen3moe, QuantMix::iq3_s, "qwen3moe-tiny-iq3_s", true},
                                           ArchMix{Arch::qwen3moe, QuantMix::iq3_xxs, "qwen3moe-tiny-iq3_xxs", true},
                                           ArchMix{Arch::qwen3moe, QuantMix::q8_0, "qwen3moe-tiny-q8_0", true},
                                           ArchMix{Arch::qwen3moe, QuantMix::f32, "qwen3moe-tiny-q8_0", false},
                                           ArchMix{Arch::qwen2moe, QuantMix::iq3_s, "qwen2moe-tiny-iq3_s", true},
                                           ArchMix{Arch::qwen2moe, QuantMix::iq3_xxs, "qwen2moe-tiny-iq3_s", false},
                                           ArchMix{Arch::qwen2moe, QuantMix::q8_0, "qwen2moe-tiny-q8_0", true},
                                           ArchMix{Arch::qwen2moe, QuantMix::f32, "qwen2moe-tiny-q8_0", false}),
                         [](const auto& info) {
                           return std::string(synth::arch_name(info.param.arch)) + "_" +
                                  std::string(synth::quant_mix_name(info.param.mix));
                         });

TEST(SynthQuantMix, Qwen2moeIq3XxsFollowsLlamaCppForFewExperts) {
  const auto plan = synth::plan_tensors(synth::preset_shape(Arch::qwen2moe, "tiny"), QuantMix::iq3_xxs);
  std::map<std::string, uint32_t> types;
  for (const auto& tensor : plan) types[tensor.name] = tensor.type;
  EXPECT_EQ(types["output.weight"], t::Q5_K);
  EXPECT_EQ(types["token_embd.weight"], t::IQ3_S);
  EXPECT_EQ(types["blk.0.attn_q.weight"], t::IQ3_XXS);
  EXPECT_EQ(types["blk.0.attn_k.weight"], t::IQ3_XXS);
  EXPECT_EQ(types["blk.0.attn_v.weight"], t::IQ3_XXS);
  EXPECT_EQ(types["blk.0.attn_output.weight"], t::IQ3_S);
  EXPECT_EQ(types["blk.0.ffn_down_shexp.weight"], t::IQ3_XXS);
  EXPECT_EQ(types["blk.0.ffn_gate_inp_shexp.weight"], t::F32);
  EXPECT_EQ(types["blk.0.attn_q.bias"], t::F32);
}

TEST(SynthQuantMix, Qwen3_30bPresetHasTheRealShapesAndWideGqaMix) {
  const auto shape = synth::preset_shape(Arch::qwen3moe, "qwen3-30b-a3b");
  const auto plan = synth::plan_tensors(shape, QuantMix::iq3_s);
  EXPECT_EQ(plan.size(), 3u + 48u * 12u);
  std::map<std::string, const synth::PlannedTensor*> by_name;
  uint64_t bytes = 0;
  for (const auto& tensor : plan) {
    by_name[tensor.name] = &tensor;
    const auto* info = gguf::find_type(tensor.type);
    bytes += tensor.rows() * tensor.row_elements() / info->block_elements * info->block_bytes;
  }
  EXPECT_EQ(by_name["blk.47.attn_q.weight"]->shape, (std::vector<uint64_t>{2048, 4096}));
  EXPECT_EQ(by_name["blk.47.attn_output.weight"]->shape, (std::vector<uint64_t>{4096, 2048}));
  EXPECT_EQ(by_name["blk.0.ffn_down_exps.weight"]->shape, (std::vector<uint64_t>{768, 2048, 128}));
  EXPECT_EQ(by_name["token_embd.weight"]->shape, (std::vector<uint64_t>{2048, 151936}));
  // 128 experts: no 8-expert bump; 8 query heads per KV head: attn_v goes to Q4_K.
  EXPECT_EQ(by_name["blk.0.attn_k.weight"]->type, t::IQ3_S);
  EXPECT_EQ(by_name["blk.0.attn_v.weight"]->type, t::Q4_K);
  EXPECT_EQ(by_name["blk.0.attn_output.weight"]->type, t::IQ3_S);
  EXPECT_EQ(by_name["output.weight"]->type, t::Q6_K);
  // About 13 GB, as real Qwen3-30B-A3B IQ3_S files are.
  EXPECT_GT(bytes, 12'000'000'000ull);
  EXPECT_LT(bytes, 14'000'000'000ull);
  EXPECT_NO_THROW(synth::preset_shape(Arch::qwen2moe, "qwen3-30b-a3b"));
  EXPECT_NO_THROW(synth::preset_shape(Arch::qwen2moe, "cpu-bench"));
}

// ---------------------------------------------------------------------------------------------------------
// Tokenizer

TEST(SynthVocab, ByteTokensMergesAndSpecialTokensAreConsistent) {
  const auto vocab = synth::build_vocab(512);
  ASSERT_EQ(vocab.tokens.size(), 512u);
  ASSERT_EQ(vocab.types.size(), 512u);
  EXPECT_EQ(vocab.tokens[0], "\xC4\x80");   // U+0100: byte 0
  EXPECT_EQ(vocab.tokens[32], "\xC4\xA0");  // U+0120 'Ġ': the space
  EXPECT_EQ(vocab.tokens[33], "!");
  EXPECT_EQ(vocab.tokens[255], "\xC3\xBF");  // U+00FF: printable, itself
  EXPECT_EQ(std::set<std::string>(vocab.tokens.begin(), vocab.tokens.end()).size(), vocab.tokens.size());
  EXPECT_GE(vocab.merges.size(), 50u);
  const std::set<std::string> known(vocab.tokens.begin(), vocab.tokens.end());
  for (const auto& merge : vocab.merges) {
    const auto space = merge.find(' ');
    ASSERT_NE(space, std::string::npos);
    EXPECT_TRUE(known.contains(merge.substr(0, space))) << merge;
    EXPECT_TRUE(known.contains(merge.substr(0, space) + merge.substr(space + 1))) << merge;
  }
  EXPECT_TRUE(known.contains("\xC4\xA0the"));  // " the"
  EXPECT_EQ(vocab.tokens[vocab.endoftext_id], "<|endoftext|>");
  EXPECT_EQ(vocab.tokens[vocab.im_start_id], "<|im_start|>");
  EXPECT_EQ(vocab.tokens[vocab.im_end_id], "<|im_end|>");
  for (const int32_t id : {vocab.endoftext_id, vocab.im_start_id, vocab.im_end_id}) {
    EXPECT_EQ(vocab.types[id], synth::TokenType::control);
  }
  EXPECT_EQ(vocab.types.back(), synth::TokenType::unused);
  EXPECT_THROW(synth::build_vocab(258), Error);
}

TEST(SynthVocab, FileCarriesQwenTokenizerKeys) {
  const SynthFile file(tiny(Arch::qwen3moe, QuantMix::f32), "tokenizer");
  const gguf::Model model(file.path);
  EXPECT_EQ(*model.find("tokenizer.ggml.model")->as_string(), "gpt2");
  EXPECT_EQ(*model.find("tokenizer.ggml.pre")->as_string(), "qwen2");
  EXPECT_EQ(model.find("tokenizer.ggml.tokens")->as_array()->items.size(), 512u);
  const auto& tokens = model.find("tokenizer.ggml.tokens")->as_array()->items;
  EXPECT_EQ(*tokens[*model.find("tokenizer.ggml.eos_token_id")->as_uint()].as_string(), "<|im_end|>");
  EXPECT_EQ(*tokens[*model.find("tokenizer.ggml.bos_token_id")->as_uint()].as_string(), "<|endoftext|>");
  EXPECT_EQ(std::get<bool>(model.find("tokenizer.ggml.add_bos_token")->data), false);
  EXPECT_NE(model.find("tokenizer.chat_template")->as_string()->find("<|im_start|>assistant"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------------------
// Reproducibility

TEST(SynthDeterminism, SameSeedGivesIdenticalBytesAtAnyThreadCount) {
  auto options = tiny(Arch::qwen2moe, QuantMix::iq3_s, 42);
  options.routing_skew = 1.0f;
  options.exact_max_values = 100'000;  // the fast path must be reproducible too
  const SynthFile first(options, "seed-a");
  options.threads = 1;
  const SynthFile second(options, "seed-b");
  options.seed = 43;
  const SynthFile other(options, "seed-c");
  EXPECT_EQ(first.bytes(), second.bytes());
  EXPECT_NE(first.bytes(), other.bytes());
}

// ---------------------------------------------------------------------------------------------------------
// Weight scales and the fast path

TEST(SynthWeights, ExactPathValuesHaveTheIntendedScales) {
  const auto options = tiny(Arch::qwen3moe, QuantMix::f32);
  const SynthFile file(options, "scales");
  const gguf::Model model(file.path);
  const synth::WeightGenerator generator(options.shape, options.seed, 0.0f);
  for (const auto& planned : synth::plan_tensors(options.shape, options.mix)) {
    SCOPED_TRACE(planned.name);
    const auto values = dequantize(model.tensor(planned.name));
    EXPECT_NEAR(standard_deviation(values), generator.value_std(planned), 0.2 * generator.value_std(planned));
  }
}

TEST(SynthWeights, FastPathBlocksDecodeToTheIntendedScale) {
  for (const QuantMix mix : {QuantMix::iq3_s, QuantMix::iq3_xxs, QuantMix::q8_0}) {
    auto options = tiny(Arch::qwen3moe, mix);
    options.exact_max_values = 0;  // every quantized tensor takes the fast path
    const SynthFile fast(options, "fast");
    options.exact_max_values = uint64_t{1} << 30;
    const SynthFile exact(options, "exact");
    const gguf::Model fast_model(fast.path), exact_model(exact.path);
    const synth::WeightGenerator generator(options.shape, options.seed, 0.0f);
    for (const auto& planned : synth::plan_tensors(options.shape, mix)) {
      if (planned.type == t::F32) continue;
      SCOPED_TRACE(std::string(synth::quant_mix_name(mix)) + " " + planned.name);
      EXPECT_TRUE(std::find_if(fast.report.tensors.begin(), fast.report.tensors.end(), [&](const auto& r) {
                    return r.name == planned.name && r.fast_path;
                  }) != fast.report.tensors.end());
      const auto values = dequantize(fast_model.tensor(planned.name));
      const double want = standard_deviation(dequantize(exact_model.tensor(planned.name)));
      EXPECT_NEAR(standard_deviation(values), want, 0.05 * want);
      EXPECT_NEAR(standard_deviation(values), generator.value_std(planned), 0.15 * generator.value_std(planned));
      // Rows are assembled, not repeated. These rows are one block each, so 16 draws from the 256 pool rows
      // repeat one about half of the time (a birthday collision); longer rows practically never repeat.
      const uint64_t n = planned.row_elements();
      std::set<std::vector<float>> rows;
      for (uint64_t r = 0; r < 16; ++r) rows.emplace(values.begin() + r * n, values.begin() + (r + 1) * n);
      EXPECT_GE(rows.size(), 12u);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Routing-skew simulation: the first layer's router alone, fed every token embedding (RMSNorm, ffn_norm).

std::vector<double> top1_shares(double skew, uint32_t layer) {
  auto options = tiny(Arch::qwen3moe, QuantMix::f32, 5);
  options.shape.n_vocab = 8192;  // more tokens, steadier shares
  options.routing_skew = static_cast<float>(skew);
  const SynthFile file(options, "skew");
  const gguf::Model model(file.path);
  const auto embeddings = dequantize(model.tensor("token_embd.weight"));
  const std::string blk = "blk." + std::to_string(layer) + ".";
  const auto norm = dequantize(model.tensor(blk + "ffn_norm.weight"));
  const auto router = dequantize(model.tensor(blk + "ffn_gate_inp.weight"));
  const uint32_t n = options.shape.n_embd, experts = options.shape.n_expert;
  std::vector<double> shares(experts, 0.0);
  for (uint32_t token = 0; token < options.shape.n_vocab; ++token) {
    const float* x = embeddings.data() + uint64_t{token} * n;
    double sum2 = 0;
    for (uint32_t i = 0; i < n; ++i) sum2 += double(x[i]) * x[i];
    const double scale = 1.0 / std::sqrt(sum2 / n + options.shape.rms_eps);
    uint32_t best = 0;
    double best_logit = -1e30;
    for (uint32_t e = 0; e < experts; ++e) {
      double logit = 0;
      for (uint32_t i = 0; i < n; ++i) logit += router[uint64_t{e} * n + i] * x[i] * scale * norm[i];
      if (logit > best_logit) best_logit = logit, best = e;
    }
    shares[best] += 1.0 / options.shape.n_vocab;
  }
  std::sort(shares.rbegin(), shares.rend());
  return shares;
}

// The slope of log(share) against log(rank + 1): minus the Zipf exponent.
double zipf_exponent(const std::vector<double>& sorted_shares) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double k = static_cast<double>(sorted_shares.size());
  for (size_t r = 0; r < sorted_shares.size(); ++r) {
    const double x = std::log(r + 1.0), y = std::log(std::max(sorted_shares[r], 1e-6));
    sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  return -(k * sxy - sx * sy) / (k * sxx - sx * sx);
}

TEST(SynthRoutingSkew, SkewsTheRoutersTopChoiceRoughlyAsZipf) {
  const auto uniform = top1_shares(0.0, 0);
  const auto skewed = top1_shares(1.0, 0);
  const auto steep = top1_shares(2.0, 1);
  const double fair = 1.0 / uniform.size();
  EXPECT_LT(uniform.front(), 2.0 * fair);
  EXPECT_LT(std::abs(zipf_exponent(uniform)), 0.4);
  // Zipf(1) over 8 experts gives the top one 1/H_8 = 0.37 of the tokens.
  EXPECT_GT(skewed.front(), 2.0 * fair);
  EXPECT_NEAR(zipf_exponent(skewed), 1.0, 0.4);
  EXPECT_NEAR(zipf_exponent(steep), 2.0, 0.8);
  EXPECT_GT(steep.front(), skewed.front());
  for (const auto& shares : {uniform, skewed, steep}) {
    std::printf("top-1 shares:");
    for (const double s : shares) std::printf(" %.3f", s);
    std::printf("  (fitted Zipf exponent %.2f)\n", zipf_exponent(shares));
  }
}

TEST(SynthRoutingSkew, EachLayerFavoursItsOwnExperts) {
  const synth::RoutingSkew skew(synth::preset_shape(Arch::qwen3moe, "cpu-bench"), 1.0f, 3);
  std::set<uint32_t> favourites;
  for (uint32_t layer = 0; layer < 12; ++layer) {
    uint32_t best = 0;
    for (uint32_t e = 1; e < 32; ++e) {
      if (skew.router_alpha(layer, e) > skew.router_alpha(layer, best)) best = e;
    }
    favourites.insert(best);
  }
  EXPECT_GT(favourites.size(), 6u);
}

}  // namespace
}  // namespace strata
