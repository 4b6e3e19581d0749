#include "core/backend/backend.hpp"

#include <cstddef>
#include <utility>
#include <vector>

#include "core/util/error.hpp"

namespace strata {
namespace {

const strata_quant_type* find_quant_type(void* context, uint32_t type_id) {
  return static_cast<const QuantRegistry*>(context)->find(type_id);
}

}  // namespace

Backend::Backend(std::string name, const strata_backend_table& table, const QuantRegistry& quants, int n_threads,
                 const std::string& options_json)
    : name_(std::move(name)), table_(table), quants_(quants) {
  strata_backend_config config{};
  config.struct_size = sizeof config;
  config.n_threads = n_threads;
  config.options_json = options_json.c_str();
  config.quant_context = const_cast<QuantRegistry*>(&quants);
  config.find_quant_type = &find_quant_type;
  call_plugin(name_ + ": create", [&](strata_error* error) { return table_.create(&config, &backend_, error); });
  cache_functions_.alloc =
      reinterpret_cast<strata_backend_weight_alloc_fn>(proc_address(STRATA_BACKEND_PROC_WEIGHT_ALLOC));
  cache_functions_.write =
      reinterpret_cast<strata_backend_weight_write_fn>(proc_address(STRATA_BACKEND_PROC_WEIGHT_WRITE));
  cache_functions_.done =
      reinterpret_cast<strata_backend_weight_writes_done_fn>(proc_address(STRATA_BACKEND_PROC_WEIGHT_WRITES_DONE));
  cache_functions_.memory_info =
      reinterpret_cast<strata_backend_memory_info_fn>(proc_address(STRATA_BACKEND_PROC_MEMORY_INFO));
  buffer_reads_ = reinterpret_cast<strata_backend_buffer_reads_fn>(proc_address(STRATA_BACKEND_PROC_BUFFER_READS));
  signalled_write_ =
      reinterpret_cast<strata_backend_signalled_write_fn>(proc_address(STRATA_BACKEND_PROC_SIGNALLED_WRITE));
  // The three come together (strata/backend.h): a backend with only some has none for the core.
  if (cache_functions_.write == nullptr || cache_functions_.done == nullptr) cache_functions_.alloc = nullptr;
}

void Backend::write_matrix(const Weight& weight, int64_t matrix, const void* data, bool background) {
  if (!has_expert_cache()) throw Error(name_ + " has no expert cache (weight_write)");
  const strata_weight_write write{sizeof(strata_weight_write), matrix, data, background ? 1 : 0};
  run("weight write", [&](strata_error* e) {
    return cache_functions_.write(backend_, const_cast<strata_weight*>(weight.get()), &write, e);
  });
}

bool Backend::writes_done() {
  if (!has_expert_cache()) return true;
  int32_t done = 0;
  run("weight writes done", [&](strata_error* e) { return cache_functions_.done(backend_, &done, e); });
  return done != 0;
}

std::optional<int32_t> Backend::thread_count() {
  const auto count = reinterpret_cast<strata_backend_thread_count_fn>(proc_address(STRATA_BACKEND_PROC_THREAD_COUNT));
  if (count == nullptr) return std::nullopt;
  int32_t threads = 0;
  run("thread count", [&](strata_error* e) { return count(backend_, &threads, e); });
  return threads;
}

std::optional<strata_memory_info> Backend::memory_info() {
  if (cache_functions_.memory_info == nullptr) return std::nullopt;
  strata_memory_info info{sizeof(strata_memory_info), 0, 0};
  run("memory info", [&](strata_error* e) { return cache_functions_.memory_info(backend_, &info, e); });
  return info;
}

Backend::~Backend() {
  if (backend_ != nullptr) table_.destroy(backend_);
}

std::string Backend::describe() const {
  const char* text = table_.describe != nullptr ? table_.describe(backend_) : nullptr;
  return text != nullptr ? text : name_;
}

void Backend::write(Buffer& buffer, const void* src, size_t bytes, size_t offset) {
  run("buffer write",
      [&](strata_error* e) { return table_.buffer_write(backend_, buffer.get(), offset, src, bytes, e); });
}

void Backend::read(const Buffer& buffer, void* dst, size_t bytes, size_t offset) {
  run("buffer read",
      [&](strata_error* e) { return table_.buffer_read(backend_, buffer.get(), offset, dst, bytes, e); });
}

void Backend::read_all(std::span<const BufferRead> reads) {
  if (buffer_reads_ == nullptr) {
    for (const BufferRead& r : reads) read(*r.buffer, r.dst, r.bytes, r.offset);
    return;
  }
  std::vector<strata_buffer_read_item>& items = read_items_;
  items.clear();
  for (const BufferRead& r : reads) items.push_back({r.buffer->get(), r.offset, r.dst, r.bytes});
  const strata_buffer_reads request{sizeof(strata_buffer_reads), static_cast<int32_t>(items.size()), items.data()};
  run("buffer reads", [&](strata_error* e) { return buffer_reads_(backend_, &request, e); });
}

void Backend::write_when_signalled(Buffer& buffer, const void* src, size_t bytes, const volatile uint64_t* signal,
                                   uint64_t value) {
  if (signalled_write_ == nullptr) throw Error(name_ + " has no signalled_write");
  strata_signalled_write write{};
  write.struct_size = sizeof write;
  write.buffer = buffer.get();
  write.src = src;
  write.bytes = bytes;
  write.signal = signal;
  write.value = value;
  run("signalled write", [&](strata_error* e) { return signalled_write_(backend_, &write, e); });
}

bool Backend::has_host_memory() const {
  return STRATA_HAS_FIELD(&table_, host_free) && table_.host_alloc != nullptr && table_.host_free != nullptr;
}

HostMemory Backend::host_alloc(size_t bytes) {
  if (!has_host_memory()) {
    return HostMemory(::operator new(bytes), [](void* memory) { ::operator delete(memory); });
  }
  void* memory = nullptr;
  run("host alloc", [&](strata_error* e) { return table_.host_alloc(backend_, bytes, &memory, e); });
  if (memory == nullptr) throw Error(name_ + ": host_alloc of " + std::to_string(bytes) + " bytes returned no memory");
  return HostMemory(memory, [this](void* allocated) { table_.host_free(backend_, allocated); });
}

Buffer::Buffer(Backend& backend, size_t bytes) : backend_(&backend), bytes_(bytes) {
  call_plugin(backend.name() + ": allocating a buffer of " + std::to_string(bytes) + " bytes",
              [&](strata_error* e) { return backend.table().buffer_alloc(backend.get(), bytes, &buffer_, e); });
}

Buffer::~Buffer() {
  if (buffer_ != nullptr) backend_->table().buffer_free(backend_->get(), buffer_);
}

Buffer::Buffer(Buffer&& other) noexcept
    : backend_(other.backend_), buffer_(std::exchange(other.buffer_, nullptr)), bytes_(other.bytes_) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (buffer_ != nullptr) backend_->table().buffer_free(backend_->get(), buffer_);
    backend_ = other.backend_;
    buffer_ = std::exchange(other.buffer_, nullptr);
    bytes_ = other.bytes_;
  }
  return *this;
}

Weight::Weight(Backend& backend, const strata_weight_desc& desc) : backend_(&backend) {
  call_plugin(backend.name() + ": loading weight " + (desc.name ? desc.name : "?"),
              [&](strata_error* e) { return backend.table().weight_load(backend.get(), &desc, &weight_, e); });
}

Weight Weight::allocate(Backend& backend, const strata_weight_desc& desc) {
  if (!backend.has_expert_cache()) throw Error(backend.name() + " has no expert cache (weight_alloc)");
  Weight weight;
  weight.backend_ = &backend;
  call_plugin(backend.name() + ": allocating weight " + (desc.name ? desc.name : "?"), [&](strata_error* e) {
    return backend.cache_functions_.alloc(backend.get(), &desc, &weight.weight_, e);
  });
  return weight;
}

Weight::~Weight() {
  if (weight_ != nullptr) backend_->table().weight_free(backend_->get(), weight_);
}

Weight::Weight(Weight&& other) noexcept : backend_(other.backend_), weight_(std::exchange(other.weight_, nullptr)) {}

Weight& Weight::operator=(Weight&& other) noexcept {
  if (this != &other) {
    if (weight_ != nullptr) backend_->table().weight_free(backend_->get(), weight_);
    backend_ = other.backend_;
    weight_ = std::exchange(other.weight_, nullptr);
  }
  return *this;
}

KvCache::KvCache(Backend& backend, const strata_kv_config& config) : backend_(backend), config_(config) {
  backend.run("kv cache create",
              [&](strata_error* e) { return backend.table().kv_create(backend.get(), &config_, &cache_, e); });
}

KvCache::~KvCache() {
  if (cache_ != nullptr) backend_.table().kv_free(backend_.get(), cache_);
}

// An optional entry is there when the table, perhaps an older and shorter one, has its field and sets it. Entries
// that go together were appended in one minor, so a table with the last of them has them all.
bool Backend::has_graphs() const {
  return STRATA_HAS_FIELD(&table_, graph_discard) && table_.graph_create != nullptr && table_.graph_free != nullptr &&
         table_.graph_begin != nullptr && table_.graph_end != nullptr && table_.graph_discard != nullptr;
}

bool Backend::has_attention_rope() const {
  return STRATA_HAS_FIELD(&table_, attention_rope) && table_.attention_rope != nullptr;
}

bool Backend::has_add_rms_norm() const {
  return STRATA_HAS_FIELD(&table_, add_rms_norm) && table_.add_rms_norm != nullptr;
}

bool Backend::has_concurrency() const {
  return STRATA_HAS_FIELD(&table_, concurrent_end) && table_.concurrent_begin != nullptr &&
         table_.concurrent_end != nullptr;
}

bool Backend::has_route_experts() const {
  return STRATA_HAS_FIELD(&table_, route_experts) && table_.route_experts != nullptr;
}

bool Backend::has_normed_inputs() const {
  return STRATA_HAS_FIELD(&table_, route_experts_normed) && table_.matmul_normed != nullptr &&
         table_.route_experts_normed != nullptr;
}

strata_proc Backend::proc_address(const char* name) const {
  if (!STRATA_HAS_FIELD(&table_, get_proc_address) || table_.get_proc_address == nullptr) return nullptr;
  return table_.get_proc_address(backend_, name);
}

StepGraph::StepGraph(Backend& backend) : backend_(backend) {
  backend.run("graph create", [&](strata_error* e) { return backend.table().graph_create(backend.get(), &graph_, e); });
}

StepGraph::~StepGraph() {
  if (graph_ != nullptr) backend_.table().graph_free(backend_.get(), graph_);
}

StepGraph::Mode StepGraph::begin(std::span<const int32_t> positions) {
  int32_t mode = STRATA_GRAPH_RUN;
  backend_.run("graph begin", [&](strata_error* e) {
    return backend_.table().graph_begin(backend_.get(), graph_, positions.data(),
                                        static_cast<int32_t>(positions.size()), &mode, e);
  });
  if (mode != STRATA_GRAPH_RUN && mode != STRATA_GRAPH_RECORD && mode != STRATA_GRAPH_REPLAY) {
    throw Error(backend_.name() + ": graph_begin answered an unknown mode " + std::to_string(mode));
  }
  return static_cast<Mode>(mode);
}

void StepGraph::end() {
  backend_.run("graph end", [&](strata_error* e) { return backend_.table().graph_end(backend_.get(), graph_, e); });
}

void StepGraph::discard() { backend_.table().graph_discard(backend_.get(), graph_); }

}  // namespace strata
