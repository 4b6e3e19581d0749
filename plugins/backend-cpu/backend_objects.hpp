// The objects behind the backend ABI's opaque handles, and checked access to them for the ops.
// A backend instance is driven by one host thread at a time (ops run in call order); the ops spread
// their work over the instance's pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "float_kernels.hpp"
#include "isa.hpp"
#include "memory_ledger.hpp"
#include "strata/backend.h"
#include "strata/backend_checks.hpp"
#include "strata/plugin.hpp"
#include "thread_pool.hpp"

struct strata_buffer {
  static constexpr size_t kAlignment = 64;  // a cache line, and one AVX-512 vector
  struct FreeDeleter {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, FreeDeleter> data;  // kAlignment-aligned; zeroed where buffer_alloc made it
  size_t bytes = 0;
  std::byte* base() const { return data.get(); }
  // The bytes an allocation of at least these takes: whole kAlignment units, at least one.
  static size_t allocated_bytes(size_t at_least) {
    const size_t rounded = (at_least + kAlignment - 1) / kAlignment * kAlignment;
    if (rounded < at_least) throw std::bad_alloc();
    return rounded == 0 ? kAlignment : rounded;
  }
  // Makes room for at least bytes (the old contents go where it grows); throws std::bad_alloc.
  void reserve(size_t at_least) {
    if (data && bytes >= at_least) return;
    data.reset(static_cast<std::byte*>(std::aligned_alloc(kAlignment, allocated_bytes(at_least))));
    if (!data) throw std::bad_alloc();
    bytes = at_least;
  }
};

struct strata_weight {
  std::string name;
  const strata_quant_type* type = nullptr;
  int64_t ne0 = 0, ne1 = 0, ne2 = 0;
  size_t row_bytes = 0;
  // The host's bytes, not copied (weight_load), or owned's (weight_alloc, or weight_load into the type's CPU layout).
  const std::byte* data = nullptr;
  std::unique_ptr<std::byte[]> owned;

  size_t matrix_bytes() const { return static_cast<size_t>(ne1) * row_bytes; }
  size_t bytes() const { return static_cast<size_t>(ne2) * matrix_bytes(); }
  const std::byte* matrix(int64_t expert) const { return data + static_cast<size_t>(expert) * matrix_bytes(); }
};

struct strata_backend {
  strata_backend(int n_threads, std::chrono::microseconds poll, strata::cpu::CpuIsa isa,
                 const strata_backend_config& config);

  strata::cpu::ThreadPool pool;
  strata::cpu::CpuIsa isa;
  const strata::cpu::FloatKernels& kernels;
  void* quant_context;
  const strata_quant_type* (*find_quant_type)(void* quant_context, uint32_t type_id);
  std::string description;
  strata::cpu::MemoryLedger memory;
  bool repack_weights = false;  // keep weights in their type's CPU layout where it has one (memory.cpp)

  // Scratch kept between ops, so steady-state ops allocate nothing. thread_floats[worker] belongs to
  // that pool worker alone.
  std::vector<std::vector<float>> thread_floats;
  std::vector<std::byte> activations;  // matmul inputs converted to the kernels' activation types
  strata_buffer interleaved;           // Q8_K matmul inputs laid out for the int8 kernel (int8_gemm.hpp)
  std::vector<float> moe_floats;       // moe_ffn's gathered inputs and per-expert results
  std::vector<int32_t> moe_slots;      // moe_ffn's (token, choice) slots grouped by expert
  std::vector<int32_t> moe_tokens;     // and the token of each
  std::vector<int64_t> moe_offsets, moe_next, moe_positions;  // moe_ffn's grouping by expert (moe.cpp)
  strata_buffer normed_sum, normed_rows;  // a normed input's x + y and norm where the op is given no place

  // A worker's float scratch of at least count values.
  float* worker_floats(int worker, size_t count) {
    auto& scratch = thread_floats[worker];
    if (scratch.size() < count) scratch.resize(count);
    return scratch.data();
  }
  const strata_quant_type* find_type(uint32_t type_id) const {
    return find_quant_type != nullptr ? find_quant_type(quant_context, type_id) : nullptr;
  }
};

namespace strata::cpu {

inline constexpr uint32_t kTypeF32 = 0;

using sdk::deref;
using sdk::elements;
using sdk::floats;
using sdk::invalid_argument;

// An F32 vector weight of at least width values (norm weights, biases).
const float* f32_vector(const strata_weight* weight, int64_t width, const char* what);

// Calls a codec function that reports failure through status + message, and throws that failure.
template <class Call>
void call_codec(Call&& call) {
  char message[256] = "";
  strata_error error{message, sizeof message};
  const strata_status status = call(&error);
  if (status != STRATA_OK) throw sdk::Failure(status, message);
}

}  // namespace strata::cpu
