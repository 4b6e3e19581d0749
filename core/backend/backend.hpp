// The core's side of a compute backend: RAII handles over the C table of strata/backend.h, with plugin
// failures turned into strata::Error. The model code talks to backends only through this class.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/quant/quant_registry.hpp"
#include "strata/backend.h"

namespace strata {

class Backend;

// Host memory from Backend::host_alloc, freed with this handle.
using HostMemory = std::unique_ptr<void, std::function<void(void*)>>;

// Float32 activations (or int32 ids) in backend memory.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend& backend, size_t bytes);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;

  strata_buffer* get() const { return buffer_; }
  size_t bytes() const { return bytes_; }

 private:
  Backend* backend_ = nullptr;
  strata_buffer* buffer_ = nullptr;
  size_t bytes_ = 0;
};

class Weight {
 public:
  Weight() = default;
  // Loads desc (weight_load).
  Weight(Backend& backend, const strata_weight_desc& desc);
  // Allocates desc's shape for Backend::write_matrix to fill (the named function weight_alloc, which the backend
  // must offer: Backend::has_expert_cache).
  static Weight allocate(Backend& backend, const strata_weight_desc& desc);
  ~Weight();
  Weight(Weight&& other) noexcept;
  Weight& operator=(Weight&& other) noexcept;

  const strata_weight* get() const { return weight_; }
  explicit operator bool() const { return weight_ != nullptr; }

 private:
  Backend* backend_ = nullptr;
  strata_weight* weight_ = nullptr;
};

class KvCache {
 public:
  KvCache(Backend& backend, const strata_kv_config& config);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  strata_kv_cache* get() const { return cache_; }
  const strata_kv_config& config() const { return config_; }

 private:
  Backend& backend_;
  strata_kv_cache* cache_ = nullptr;
  strata_kv_config config_;
};

// A recorded step (strata/backend.h, ABI 1.1): replays a decode step's ops at one launch where the
// backend can. Only made where Backend::has_graphs().
class StepGraph {
 public:
  enum class Mode { run = STRATA_GRAPH_RUN, record = STRATA_GRAPH_RECORD, replay = STRATA_GRAPH_REPLAY };

  explicit StepGraph(Backend& backend);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  Mode begin(std::span<const int32_t> positions);
  void end();
  // After a failed op while recording: nothing of the step ran, and the graph records no more.
  void discard();

 private:
  Backend& backend_;
  strata_graph* graph_ = nullptr;
};

class Backend {
 public:
  // name labels errors ("backend-cpu"); quants must outlive the backend (its kernels are looked up there).
  Backend(std::string name, const strata_backend_table& table, const QuantRegistry& quants, int n_threads,
          const std::string& options_json);
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  const std::string& name() const { return name_; }
  std::string describe() const;
  const strata_backend_table& table() const { return table_; }
  strata_backend* get() const { return backend_; }
  // The types the backend's weights are decoded with (its find_quant_type).
  const QuantRegistry& quants() const { return quants_; }
  // Whether the backend records step graphs (an ABI 1.1 table with the graph entries).
  bool has_graphs() const;
  // Whether attention_rope prepares q and k inside the attention op (an ABI 1.2 table with the entry).
  bool has_attention_rope() const;
  // Whether add_rms_norm does the residual add and the next norm as one op (ABI 1.2).
  bool has_add_rms_norm() const;
  // Whether the backend may run independent ops at once (concurrent_begin/end, ABI 1.3).
  bool has_concurrency() const;
  // Whether route_experts does the router's matmul and the route as one op (ABI 1.3).
  bool has_route_experts() const;
  // Whether matmul_normed and route_experts_normed read the residual stream through its norm (ABI 1.5).
  bool has_normed_inputs() const;
  // The backend's optional function called name (a STRATA_BACKEND_PROC_* of strata/backend.h; ABI 1.7), for the
  // caller to cast to that name's signature, or nullptr where the backend has none by that name.
  strata_proc proc_address(const char* name) const;
  // Whether the backend offers the expert cache's named functions (weight_alloc, weight_write, weight_writes_done).
  bool has_expert_cache() const { return cache_functions_.alloc != nullptr; }
  // Writes one matrix of a Weight::allocate weight from host bytes in the file's layout (weight_write): ordered
  // with the ops, or in the background (see strata/backend.h), then data must live until writes_done().
  void write_matrix(const Weight& weight, int64_t matrix, const void* data, bool background);
  // Whether every background write_matrix has finished (weight_writes_done); never waits.
  bool writes_done();
  // The device memory the instance counts against (memory_info), or nothing where it does not say.
  std::optional<strata_memory_info> memory_info();
  // The CPU threads the instance computes on (thread_count), or nothing where it does not say.
  std::optional<int32_t> thread_count();

  // Calls ops(), which calls independent ops (see concurrent_begin in strata/backend.h), inside a concurrent
  // region where the backend has them and concurrent is set; else plainly.
  template <class Ops>
  void concurrently(bool concurrent, Ops&& ops);

  void write(Buffer& buffer, const void* src, size_t bytes, size_t offset = 0);
  void read(const Buffer& buffer, void* dst, size_t bytes, size_t offset = 0);
  // Several reads with one wait for the device where the backend offers buffer_reads, else one by one.
  struct BufferRead {
    const Buffer* buffer;
    void* dst;
    size_t bytes;
    size_t offset = 0;
  };
  void read_all(std::span<const BufferRead> reads);
  // Whether the backend offers signalled_write (strata/backend.h).
  bool has_signalled_write() const { return signalled_write_ != nullptr; }
  // Writes src (host_alloc memory) into buffer once another thread has stored value or more into *signal (also
  // host_alloc memory), ordered with the ops; returns at once (signalled_write). That thread must signal on every
  // path.
  void write_when_signalled(Buffer& buffer, const void* src, size_t bytes, const volatile uint64_t* signal,
                            uint64_t value);
  // bytes of host memory that read() fills fastest (host_alloc, ABI 1.4: page-locked on a GPU), else of
  // the heap. The handle must not outlive the backend.
  HostMemory host_alloc(size_t bytes);
  // Whether host_alloc gives the backend's own host memory (ABI 1.4; page-locked on a GPU), not the heap's.
  bool has_host_memory() const;

  // Calls an op of the table: call(strata_error*) -> strata_status; what names it in errors.
  template <class Call>
  void run(const char* what, Call&& call);

 private:
  friend class Weight;  // Weight::allocate calls weight_alloc

  std::string name_;
  const strata_backend_table& table_;
  const QuantRegistry& quants_;
  strata_backend* backend_ = nullptr;
  struct CacheFunctions {
    strata_backend_weight_alloc_fn alloc = nullptr;
    strata_backend_weight_write_fn write = nullptr;
    strata_backend_weight_writes_done_fn done = nullptr;
    strata_backend_memory_info_fn memory_info = nullptr;
  } cache_functions_;  // asked once after create: the answers hold for the instance's life
  strata_backend_buffer_reads_fn buffer_reads_ = nullptr;
  std::vector<strata_buffer_read_item> read_items_;  // read_all's, kept: a decode step's reads allocate nothing
  strata_backend_signalled_write_fn signalled_write_ = nullptr;
};

}  // namespace strata

#include "core/plugin/abi_call.hpp"

namespace strata {
template <class Call>
void Backend::run(const char* what, Call&& call) {
  call_plugin(name_ + ": " + what, std::forward<Call>(call));
}

template <class Ops>
void Backend::concurrently(bool concurrent, Ops&& ops) {
  if (!concurrent || !has_concurrency()) {
    ops();
    return;
  }
  run("concurrent_begin", [&](strata_error* e) { return table_.concurrent_begin(backend_, e); });
  try {
    ops();
  } catch (...) {
    // The region is closed whatever failed, so that the backend's streams join again; the op's error wins.
    strata_error ignored{nullptr, 0};
    table_.concurrent_end(backend_, &ignored);
    throw;
  }
  run("concurrent_end", [&](strata_error* e) { return table_.concurrent_end(backend_, e); });
}
}  // namespace strata
