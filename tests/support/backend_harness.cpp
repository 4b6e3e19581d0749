#include "support/backend_harness.hpp"

#include <cstddef>
#include <cstring>
#include <random>

#include "iq3_s.hpp"
#include "iq3_xxs.hpp"
#include "q4_k.hpp"
#include "q5_k.hpp"
#include "q6_k.hpp"
#include "strata/plugin.hpp"

namespace strata::test {

std::vector<float> random_floats(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(n);
  for (float& v : values) v = normal(rng);
  return values;
}

TestTypes::TestTypes() {
  registry_.offer("core", base_quant_table());
  registry_.offer("quant-k", sdk::QuantTable<quant_k::Q4KCodec, quant_k::Q5KCodec, quant_k::Q6KCodec>::table);
  registry_.offer("quant-iq3", sdk::QuantTable<iq3::Iq3XxsCodec, iq3::Iq3SCodec>::table);
  registry_.resolve({});
}

const strata_quant_type* TestTypes::find(uint32_t type_id, Variant variant) {
  const auto extra = extra_.find(type_id);
  const strata_quant_type* offered = extra != extra_.end() ? &extra->second : registry_.find(type_id);
  if (offered == nullptr || variant == Variant::as_offered) return offered;
  const auto key = std::pair(variant, type_id);
  if (const auto known = variants_.find(key); known != variants_.end()) return &known->second;
  strata_quant_type copy = *offered;
  if (variant != Variant::abi_1_0) {
    // A CPU layout would bring its own kernels back: a variant without some keeps the file's.
    copy.cpu_repacked = nullptr;
    copy.cpu_repack = nullptr;
  }
  switch (variant) {
    case Variant::without_cpu_dot:
      copy.cpu_activation_type = 0;
      copy.cpu_dot_rows = nullptr;
      copy.cpu_dot_rows_multi = nullptr;
      copy.cpu_rows_to_int8 = nullptr;
      break;
    case Variant::one_token_dot:
      copy.cpu_dot_rows_multi = nullptr;
      copy.cpu_rows_to_int8 = nullptr;
      break;
    case Variant::without_int8:
      copy.cpu_rows_to_int8 = nullptr;
      break;
    case Variant::abi_1_0:
      copy.struct_size = STRATA_FIELD_END(strata_quant_type, cpu_dot_rows_multi);
      break;
    case Variant::as_offered:
      break;
  }
  if (copy.cpu_rows_to_int8 == nullptr) copy.cpu_rows_int8_offsets = nullptr;  // they complete its rows
  return &variants_.emplace(key, copy).first->second;
}

TestTypes& test_types() {
  static TestTypes types;
  return types;
}

HostWeight make_weight(uint32_t type_id, int64_t ne0, int64_t ne1, int64_t ne2, uint32_t seed, float scale) {
  const strata_quant_type& type = test_types().type(type_id);
  HostWeight weight{type_id, ne0, ne1, ne2, {}, {}};
  std::vector<float> values = random_floats(static_cast<size_t>(ne0 * ne1 * ne2), seed, 0.5f);
  for (float& value : values) value *= scale;
  const int64_t n_blocks = ne0 * ne1 * ne2 / type.block_elements;
  weight.bytes.resize(static_cast<size_t>(n_blocks * type.block_bytes));
  EXPECT_EQ(type.quantize(values.data(), weight.bytes.data(), ne1 * ne2, ne0, nullptr, nullptr), STRATA_OK);
  weight.decoded.resize(values.size());
  EXPECT_EQ(type.dequantize(weight.bytes.data(), weight.decoded.data(), n_blocks, nullptr), STRATA_OK);
  return weight;
}

HostWeight f32_weight(const std::vector<float>& values) {
  HostWeight weight{kF32, static_cast<int64_t>(values.size()), 1, 1, std::vector<uint8_t>(values.size() * 4), values};
  std::memcpy(weight.bytes.data(), values.data(), weight.bytes.size());
  return weight;
}

TestBackend::TestBackend(const strata_backend_table& table, int n_threads, const std::string& options,
                         const strata_quant_type* (*find_type)(void*, uint32_t))
    : table_(table) {
  const strata_backend_config config{sizeof(strata_backend_config), n_threads, options.c_str(), &test_types(),
                                     find_type};
  create_status_ = table_.create(&config, &backend_, error());
}

TestBackend::~TestBackend() {
  if (backend_ == nullptr) return;
  for (strata_buffer* buffer : buffers_) table_.buffer_free(backend_, buffer);
  for (strata_weight* weight : weights_) table_.weight_free(backend_, weight);
  for (strata_kv_cache* cache : caches_) table_.kv_free(backend_, cache);
  table_.destroy(backend_);
}

strata_error* TestBackend::error() {
  message_[0] = '\0';
  error_ = {message_, sizeof message_};
  return &error_;
}

strata_buffer* TestBackend::alloc(size_t bytes) {
  strata_buffer* buffer = nullptr;
  EXPECT_EQ(table_.buffer_alloc(backend_, bytes, &buffer, error()), STRATA_OK) << message_;
  buffers_.push_back(buffer);
  return buffer;
}

strata_status TestBackend::try_load(const HostWeight& weight, strata_weight** out) {
  const strata_weight_desc desc{
      sizeof(strata_weight_desc), "blk.0.test.weight", weight.type, weight.ne0, weight.ne1, weight.ne2,
      weight.bytes.data()};
  const strata_status status = table_.weight_load(backend_, &desc, out, error());
  if (status == STRATA_OK) weights_.push_back(*out);
  return status;
}

strata_weight* TestBackend::load(const HostWeight& weight) {
  strata_weight* loaded = nullptr;
  EXPECT_EQ(try_load(weight, &loaded), STRATA_OK) << message_;
  return loaded;
}

strata_weight* TestBackend::load_f32(const std::vector<float>& values) {
  host_weights_.push_back(f32_weight(values));
  return load(host_weights_.back());
}

strata_kv_cache* TestBackend::kv(int32_t n_layers, int32_t n_ctx, int32_t n_head_kv, int32_t head_dim,
                                 int32_t kv_type) {
  const strata_kv_config config{sizeof(strata_kv_config), n_layers, n_ctx, n_head_kv, head_dim, kv_type};
  strata_kv_cache* cache = nullptr;
  EXPECT_EQ(table_.kv_create(backend_, &config, &cache, error()), STRATA_OK) << message_;
  caches_.push_back(cache);
  return cache;
}

}  // namespace strata::test
