#include "cuda_backend.hpp"

#include "ops.hpp"
#include "strata/plugin.hpp"

namespace strata::cuda {
namespace {

// The C entry point of an op: the op's own parameters plus the error buffer; exceptions become a status.
template <auto Op>
struct Entry;
template <class... Args, void (*Op)(Args...)>
struct Entry<Op> {
  static strata_status call(Args... args, strata_error* error) {
    return sdk::guarded(error, [&] { Op(args...); });
  }
};

// Release and describe cannot report errors; they are safe to call with NULL.
void destroy_entry(strata_backend* backend) { destroy(backend); }
void buffer_free_entry(strata_backend* backend, strata_buffer* buffer) { buffer_free(backend, buffer); }
void weight_free_entry(strata_backend* backend, strata_weight* weight) { weight_free(backend, weight); }
void kv_free_entry(strata_backend* backend, strata_kv_cache* cache) { kv_free(backend, cache); }
const char* describe_entry(strata_backend* backend) { return backend != nullptr ? describe(backend) : "cuda"; }

constexpr strata_backend_table kTable = {
    sizeof(strata_backend_table),
    &Entry<create>::call,
    &destroy_entry,
    &describe_entry,
    &Entry<buffer_alloc>::call,
    &buffer_free_entry,
    &Entry<buffer_write>::call,
    &Entry<buffer_read>::call,
    &Entry<weight_load>::call,
    &weight_free_entry,
    &Entry<kv_create>::call,
    &kv_free_entry,
    &Entry<get_rows>::call,
    &Entry<rms_norm>::call,
    &Entry<matmul>::call,
    &Entry<rope_neox>::call,
    &Entry<attention>::call,
    &Entry<route>::call,
    &Entry<moe_ffn>::call,
    &Entry<add>::call,
    &Entry<mul>::call,
    &Entry<unary>::call,
    &Entry<scale_rows>::call,
};

}  // namespace

const strata_backend_table& cuda_backend_table() { return kTable; }

}  // namespace strata::cuda
