// What the backend tests share: the quant types they hand a backend (as plugins offer them, or altered
// to steer a backend down another path), weights quantized from random floats together with the floats
// their blocks decode to, and one backend instance over a C table that frees what it made.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/quant/quant_registry.hpp"
#include "strata/backend.h"

namespace strata::test {

inline constexpr uint32_t kF32 = 0, kF16 = 1, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kIQ3_XXS = 18, kIQ3_S = 21,
                          kBF16 = 30;

// n normal floats of standard deviation scale; the same seed gives the same floats.
std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f);

// The core's types, the k-quants and IQ3 (with their CUDA launchers when built with CUDA), plus any
// test-only types added before use. Each variant is a copy of a type with fields removed.
class TestTypes {
 public:
  enum class Variant {
    as_offered,
    without_cpu_dot,  // no CPU dot kernels: the CPU backend multiplies decoded floats
    one_token_dot,    // no multi-token CPU kernel: one cpu_dot_rows call per token
    without_int8,     // the dot kernels without cpu_rows_to_int8: no int8 matrix kernel
    abi_1_0           // the table an ABI 1.0 plugin has: ends before the grouped CUDA launchers
  };

  TestTypes();
  void add(const strata_quant_type& type) { extra_.emplace(type.type_id, type); }
  const strata_quant_type* find(uint32_t type_id, Variant variant);
  const strata_quant_type& type(uint32_t type_id) { return *find(type_id, Variant::as_offered); }

  // A strata_backend_config::find_quant_type for a variant (its context is the TestTypes).
  template <Variant V>
  static const strata_quant_type* finder(void* context, uint32_t type_id) {
    return static_cast<TestTypes*>(context)->find(type_id, V);
  }

 private:
  QuantRegistry registry_;
  std::map<uint32_t, strata_quant_type> extra_;
  std::map<std::pair<Variant, uint32_t>, strata_quant_type> variants_;  // node-based: pointers stay valid
};

TestTypes& test_types();

// Bytes of a weight quantized from random floats, and the floats its blocks decode to.
struct HostWeight {
  uint32_t type;
  int64_t ne0, ne1, ne2;
  std::vector<uint8_t> bytes;
  std::vector<float> decoded;

  const float* row(int64_t expert, int64_t r) const { return decoded.data() + (expert * ne1 + r) * ne0; }
};

HostWeight make_weight(uint32_t type_id, int64_t ne0, int64_t ne1, int64_t ne2, uint32_t seed, float scale = 1.0f);
HostWeight f32_weight(const std::vector<float>& values);

// One backend instance of a table, with its buffers, weights and caches freed with it. Calls that must
// succeed are checked with EXPECT; the try_ forms return the status.
class TestBackend {
 public:
  TestBackend(const strata_backend_table& table, int n_threads, const std::string& options,
              const strata_quant_type* (*find_type)(void*, uint32_t));
  ~TestBackend();
  TestBackend(const TestBackend&) = delete;
  TestBackend& operator=(const TestBackend&) = delete;

  const strata_backend_table& table() const { return table_; }
  strata_backend* get() { return backend_; }
  strata_status create_status() const { return create_status_; }
  strata_error* error();
  std::string message() const { return message_; }

  strata_buffer* alloc(size_t bytes);
  strata_buffer* alloc_floats(size_t n) { return alloc(n * sizeof(float)); }
  template <class T>
  void write(strata_buffer* buffer, const std::vector<T>& values) {
    EXPECT_EQ(table_.buffer_write(backend_, buffer, 0, values.data(), values.size() * sizeof(T), error()), STRATA_OK)
        << message_;
  }
  template <class T>
  strata_buffer* upload(const std::vector<T>& values) {
    strata_buffer* buffer = alloc(values.size() * sizeof(T));
    write(buffer, values);
    return buffer;
  }
  template <class T = float>
  std::vector<T> read(strata_buffer* buffer, size_t n) {
    std::vector<T> values(n);
    EXPECT_EQ(table_.buffer_read(backend_, buffer, 0, values.data(), n * sizeof(T), error()), STRATA_OK) << message_;
    return values;
  }
  strata_status try_load(const HostWeight& weight, strata_weight** out);
  strata_weight* load(const HostWeight& weight);
  // A weight made by another entry (a named function's weight_alloc), freed with the others.
  strata_weight* adopt(strata_weight* weight) {
    if (weight != nullptr) weights_.push_back(weight);
    return weight;
  }
  // An F32 vector weight; the backend may read the bytes in place, so they live as long as it does.
  strata_weight* load_f32(const std::vector<float>& values);
  strata_kv_cache* kv(int32_t n_layers, int32_t n_ctx, int32_t n_head_kv, int32_t head_dim, int32_t kv_type);
  // Runs an op given as (backend, error) -> status and expects success.
  template <class Op>
  void run(const char* what, Op op) {
    EXPECT_EQ(op(backend_, error()), STRATA_OK) << what << ": " << message_;
  }

 private:
  const strata_backend_table& table_;
  strata_backend* backend_ = nullptr;
  strata_status create_status_ = STRATA_OK;
  char message_[512] = "";
  strata_error error_{};
  std::vector<strata_buffer*> buffers_;
  std::vector<strata_weight*> weights_;
  std::vector<strata_kv_cache*> caches_;
  std::vector<HostWeight> host_weights_;
};

}  // namespace strata::test
