// Header-only C++ helpers for writing a Strata plugin against the C ABI in plugin.h / quant.h.
// Everything here stays inside the plugin: only the C structs cross the boundary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>

#include "strata/cpu_isa.hpp"
#include "strata/plugin.h"
#include "strata/quant.h"

namespace strata::sdk {

// Throw inside a plugin to return a specific status; any other exception becomes STRATA_E_INTERNAL.
class Failure : public std::runtime_error {
 public:
  Failure(strata_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  strata_status status() const noexcept { return status_; }

 private:
  strata_status status_;
};

inline void write_error(strata_error* error, const char* message) noexcept {
  if (error == nullptr || error->message == nullptr || error->capacity == 0) return;
  std::size_t length = std::strlen(message);
  if (length >= error->capacity) length = error->capacity - 1;
  std::memcpy(error->message, message, length);
  error->message[length] = '\0';
}

// Runs body and turns any exception into a status plus message: exceptions never cross the boundary.
template <class Body>
strata_status guarded(strata_error* error, Body&& body) noexcept {
  try {
    body();
    return STRATA_OK;
  } catch (const Failure& failure) {
    write_error(error, failure.what());
    return failure.status();
  } catch (const std::bad_alloc&) {
    write_error(error, "out of memory");
    return STRATA_E_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    write_error(error, e.what());
    return STRATA_E_INTERNAL;
  } catch (...) {
    write_error(error, "unknown exception");
    return STRATA_E_INTERNAL;
  }
}

// A block codec written as a plain C++ class becomes a strata_quant_type. A Codec provides
//   static constexpr uint32_t type_id, block_elements, block_bytes;
//   static constexpr const char* name;
//   static void dequantize(const uint8_t* blocks, float* out, int64_t n_blocks);
//   static void quantize_row(const float* src, uint8_t* blocks, int64_t n_per_row, const float* importance);
// quantize_row may throw Failure; importance is nullptr or n_per_row weights.
template <class Codec>
struct QuantTypeAdapter {
  static strata_status dequantize(const void* blocks, float* out, int64_t n_blocks, strata_error* error) {
    return guarded(error, [&] { Codec::dequantize(static_cast<const uint8_t*>(blocks), out, n_blocks); });
  }
  static strata_status quantize(const float* src, void* blocks, int64_t n_rows, int64_t n_per_row,
                                const float* importance, strata_error* error) {
    return guarded(error, [&] {
      if (n_rows < 0 || n_per_row <= 0 || n_per_row % Codec::block_elements != 0) {
        throw Failure(STRATA_E_INVALID_ARGUMENT, std::string(Codec::name) + ": a row of " + std::to_string(n_per_row) +
                                                     " values is not a multiple of " +
                                                     std::to_string(Codec::block_elements));
      }
      auto* out = static_cast<uint8_t*>(blocks);
      const int64_t row_bytes = n_per_row / Codec::block_elements * Codec::block_bytes;
      for (int64_t row = 0; row < n_rows; ++row) {
        Codec::quantize_row(src + row * n_per_row, out + row * row_bytes, n_per_row, importance);
      }
    });
  }
};

// A Codec may also offer a CPU dot kernel:
//   static constexpr uint32_t cpu_activation_type;   // e.g. 15 (Q8_K)
//   static void cpu_dot_rows(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes,
//                            const void* activation, float* out);
template <class Codec>
concept HasCpuDot = requires {
  Codec::cpu_activation_type;
  &Codec::cpu_dot_rows;
};

// And, optionally, the multi-token form (strata_quant_type::cpu_dot_rows_multi):
//   static void cpu_dot_rows_multi(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes,
//                                  const void* activations, size_t activation_stride, int64_t n_tokens,
//                                  float* out, size_t out_stride);
template <class Codec>
concept HasCpuDotMulti = HasCpuDot<Codec> && requires {
  &Codec::cpu_dot_rows_multi;
};

// And, optionally, its rows as int8 levels, integer scales per 32 and float scales per 256 for the CPU backend's
// int8 matrix kernels (strata_quant_type::cpu_rows_to_int8, ABI 1.8):
//   static void cpu_rows_to_int8(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, int8_t* levels,
//                                int16_t* group_scales, float* block_scales);
template <class Codec>
concept HasCpuRowsToInt8 = requires {
  &Codec::cpu_rows_to_int8;
};

// And, with it, where its values carry an offset per 32 (strata_quant_type::cpu_rows_int8_offsets, ABI 1.10):
//   static void cpu_rows_int8_offsets(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes,
//                                     int16_t* group_offsets, float* block_offset_scales);
template <class Codec>
concept HasCpuRowsInt8Offsets = HasCpuRowsToInt8<Codec> && requires {
  &Codec::cpu_rows_int8_offsets;
};

// And CUDA launchers (see quant.h), when the plugin is built with CUDA:
//   static strata_status cuda_dequantize_f16(const void*, uint16_t*, int64_t, void*, strata_error*);
//   static strata_status cuda_matvec(const void*, int64_t, int64_t, size_t, const float*, int64_t, float*,
//                                    void*, strata_error*);
template <class Codec>
concept HasCudaKernels = requires {
  &Codec::cuda_dequantize_f16;
  &Codec::cuda_matvec;
};

// And the grouped launchers (ABI 1.1):
//   static strata_status cuda_expert_matvec(const strata_cuda_expert_matvec*, void*, strata_error*);
//   static strata_status cuda_grouped_gemm(const strata_cuda_grouped_gemm*, void*, strata_error*);
template <class Codec>
concept HasCudaExpertKernels = HasCudaKernels<Codec> && requires {
  &Codec::cuda_expert_matvec;
};
template <class Codec>
concept HasCudaGroupedGemm = HasCudaKernels<Codec> && requires {
  &Codec::cuda_grouped_gemm;
};
// And the matvec on activations rounded to 8 bits (ABI 1.2):
//   static strata_status cuda_matvec_q8(const void*, int64_t, int64_t, size_t, const int8_t*, const float*,
//                                       int64_t, float*, void*, strata_error*);
template <class Codec>
concept HasCudaMatvecQ8 = HasCudaKernels<Codec> && requires {
  &Codec::cuda_matvec_q8;
};
// And the matvec that normalizes its activations itself (ABI 1.5):
//   static strata_status cuda_matvec_normed(const void*, int64_t, int64_t, size_t, const strata_cuda_normed_rows*,
//                                           int64_t, float*, void*, strata_error*);
template <class Codec>
concept HasCudaMatvecNormed = HasCudaKernels<Codec> && requires {
  &Codec::cuda_matvec_normed;
};

// And a repacked layout for its CUDA kernels (ABI 1.6): a Codec of its own with CUDA launchers, and the
// exact conversion into it:
//   using CudaRepacked = OtherCodec;   // type_id = Codec::type_id | STRATA_REPACKED_TYPE_BIT
//   static void cuda_repack(const uint8_t* blocks, uint8_t* out, int64_t n_blocks);
template <class Codec>
concept HasCudaRepacked = requires {
  typename Codec::CudaRepacked;
  &Codec::cuda_repack;
}
&&HasCudaKernels<typename Codec::CudaRepacked>;

// And one for its CPU kernels (ABI 1.9), likewise:
//   using CpuRepacked = OtherCodec;    // with a CPU dot kernel; type_id as CudaRepacked's
//   static void cpu_repack(const uint8_t* blocks, uint8_t* out, int64_t n_blocks);
template <class Codec>
concept HasCpuRepacked = requires {
  typename Codec::CpuRepacked;
  &Codec::cpu_repack;
}
&&HasCpuDot<typename Codec::CpuRepacked>;

template <auto Repack>
strata_status repack_adapter(const void* blocks, void* out, int64_t n_blocks, strata_error* error) {
  return guarded(error, [&] { Repack(static_cast<const uint8_t*>(blocks), static_cast<uint8_t*>(out), n_blocks); });
}

template <class Codec>
constexpr strata_quant_type make_quant_type();

template <class Codec>
inline constexpr strata_quant_type quant_type_v = make_quant_type<Codec>();

// A quant type with its geometry and codec functions and no kernels (every field named: GCC 12 warns on a
// designated initializer that leaves one out).
constexpr strata_quant_type quant_type_without_kernels(uint32_t type_id, const char* name, uint32_t block_elements,
                                                       uint32_t block_bytes,
                                                       decltype(strata_quant_type::dequantize) dequantize,
                                                       decltype(strata_quant_type::quantize) quantize) {
  return {.struct_size = sizeof(strata_quant_type),
          .type_id = type_id,
          .name = name,
          .block_elements = block_elements,
          .block_bytes = block_bytes,
          .dequantize = dequantize,
          .quantize = quantize,
          .cpu_activation_type = 0,
          .cpu_dot_rows = nullptr,
          .cuda_dequantize_f16 = nullptr,
          .cuda_matvec = nullptr,
          .cpu_dot_rows_multi = nullptr,
          .cuda_expert_matvec = nullptr,
          .cuda_grouped_gemm = nullptr,
          .cuda_matvec_q8 = nullptr,
          .cuda_matvec_normed = nullptr,
          .cuda_repacked = nullptr,
          .cuda_repack = nullptr,
          .cpu_rows_to_int8 = nullptr,
          .cpu_repacked = nullptr,
          .cpu_repack = nullptr,
          .cpu_rows_int8_offsets = nullptr};
}

template <class Codec>
constexpr strata_quant_type make_quant_type() {
  // The kernels are set below from what the codec offers.
  strata_quant_type type =
      quant_type_without_kernels(Codec::type_id, Codec::name, Codec::block_elements, Codec::block_bytes,
                                 &QuantTypeAdapter<Codec>::dequantize, &QuantTypeAdapter<Codec>::quantize);
  if constexpr (HasCpuDot<Codec>) {
    type.cpu_activation_type = Codec::cpu_activation_type;
    type.cpu_dot_rows = &Codec::cpu_dot_rows;
  }
  if constexpr (HasCpuDotMulti<Codec>) type.cpu_dot_rows_multi = &Codec::cpu_dot_rows_multi;
  if constexpr (HasCpuRowsToInt8<Codec>) type.cpu_rows_to_int8 = &Codec::cpu_rows_to_int8;
  if constexpr (HasCpuRowsInt8Offsets<Codec>) type.cpu_rows_int8_offsets = &Codec::cpu_rows_int8_offsets;
  if constexpr (HasCudaKernels<Codec>) {
    type.cuda_dequantize_f16 = &Codec::cuda_dequantize_f16;
    type.cuda_matvec = &Codec::cuda_matvec;
  }
  if constexpr (HasCudaExpertKernels<Codec>) type.cuda_expert_matvec = &Codec::cuda_expert_matvec;
  if constexpr (HasCudaGroupedGemm<Codec>) type.cuda_grouped_gemm = &Codec::cuda_grouped_gemm;
  if constexpr (HasCudaMatvecQ8<Codec>) type.cuda_matvec_q8 = &Codec::cuda_matvec_q8;
  if constexpr (HasCudaMatvecNormed<Codec>) type.cuda_matvec_normed = &Codec::cuda_matvec_normed;
  if constexpr (HasCudaRepacked<Codec>) {
    static_assert(Codec::CudaRepacked::type_id == (Codec::type_id | STRATA_REPACKED_TYPE_BIT) &&
                  Codec::CudaRepacked::block_elements == Codec::block_elements);
    type.cuda_repacked = &quant_type_v<typename Codec::CudaRepacked>;
    type.cuda_repack = &repack_adapter<&Codec::cuda_repack>;
  }
  if constexpr (HasCpuRepacked<Codec>) {
    static_assert(Codec::CpuRepacked::type_id == (Codec::type_id | STRATA_REPACKED_TYPE_BIT) &&
                  Codec::CpuRepacked::block_elements == Codec::block_elements);
    type.cpu_repacked = &quant_type_v<typename Codec::CpuRepacked>;
    type.cpu_repack = &repack_adapter<&Codec::cpu_repack>;
  }
  return type;
}

template <class... Codecs>
struct QuantTable {
  static inline const strata_quant_type* const types[] = {&quant_type_v<Codecs>...};
  static inline const strata_quant_table table = {.struct_size = sizeof(strata_quant_table),
                                                  .type_count = static_cast<uint32_t>(sizeof...(Codecs)),
                                                  .types = types};
};

// Takes what the host's services say about this library at init: the CPU instruction set its kernels use
// (strata_host_services::cpu_isa; an older host's services end before it). A plugin with an init of its own
// calls this first; make_descriptor gives a plugin without one an init that does.
inline void adopt_host_settings(const strata_host_services* host) {
  if (host == nullptr || !STRATA_HAS_FIELD(host, cpu_isa) || host->cpu_isa == nullptr) return;
  const std::string problem = cpu_isa_request_problem("the host's cpu_isa", host->cpu_isa);
  if (*host->cpu_isa != '\0' && !problem.empty()) throw Failure(STRATA_E_INVALID_ARGUMENT, problem);
  host_cpu_isa_request() = host->cpu_isa;
}

inline strata_status adopt_host_settings_init(const strata_host_services* host, const char*, strata_error* error) {
  return guarded(error, [&] { adopt_host_settings(host); });
}

struct DescriptorHooks {
  strata_status (*probe)(int32_t* score, strata_error* error) = nullptr;
  strata_status (*init)(const strata_host_services* host, const char* options_json, strata_error* error) = nullptr;
  void (*shutdown)() = nullptr;
};

constexpr strata_plugin_descriptor make_descriptor(uint32_t kind, const char* name, const char* version,
                                                   const void* table, DescriptorHooks hooks = {}) {
  return strata_plugin_descriptor{.struct_size = sizeof(strata_plugin_descriptor),
                                  .abi_major = STRATA_ABI_MAJOR,
                                  .abi_minor = STRATA_ABI_MINOR,
                                  .kind = kind,
                                  .name = name,
                                  .version = version,
                                  .table = table,
                                  .probe = hooks.probe,
                                  .init = hooks.init != nullptr ? hooks.init : &adopt_host_settings_init,
                                  .shutdown = hooks.shutdown};
}

}  // namespace strata::sdk

// Defines the one exported symbol of a plugin from a descriptor expression.
#define STRATA_PLUGIN_QUERY(descriptor_expression)                                            \
  extern "C" STRATA_PLUGIN_EXPORT const strata_plugin_descriptor* strata_plugin_query(void) { \
    static const strata_plugin_descriptor descriptor = descriptor_expression;                 \
    return &descriptor;                                                                       \
  }

// A whole quant plugin in one line: STRATA_QUANT_PLUGIN("quant-x", "1.0.0", CodecA, CodecB).
#define STRATA_QUANT_PLUGIN(plugin_name, plugin_version, ...)                                               \
  STRATA_PLUGIN_QUERY(::strata::sdk::make_descriptor(STRATA_PLUGIN_KIND_QUANT, plugin_name, plugin_version, \
                                                     &::strata::sdk::QuantTable<__VA_ARGS__>::table))
