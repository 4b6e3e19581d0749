#include "core/model/hybrid_experts.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <tuple>
#include <utility>

#include "core/experts/placement_estimate.hpp"
#include "core/util/error.hpp"
#include "core/util/log.hpp"

namespace strata {
namespace {

// A step's experts copied over PCIe share these many staging slots per set of types by default, in two halves: a
// decode step misses at most n_used experts a layer (one half); a prompt step's copies go through them a half at a
// time, the next half's copies running beside the experts of the last.
constexpr int32_t kStagingSlotsPerUsedExpert = 4;
// A swap needs the newcomer's decayed count this much above the victim's: no thrashing between equals.
constexpr double kSwapMargin = 1.1;
constexpr auto kProgressInterval = std::chrono::seconds(3);

// "1.25 GiB", or "3.50 MiB" below a GiB.
std::string gib(double bytes) {
  const double unit = double(uint64_t{1} << 30);
  return bytes >= unit ? fmt::format("{:.2f} GiB", bytes / unit) : fmt::format("{:.2f} MiB", bytes * 1024 / unit);
}
std::string mib(double bytes) { return fmt::format("{:.0f} MiB", bytes / double(uint64_t{1} << 20)); }

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

size_t floats(int64_t rows, int64_t width) { return static_cast<size_t>(rows * width) * sizeof(float); }

}  // namespace

// A layer's slots on the device: the file's three tensors where the layer is whole, else ne2 = its slots.
struct HybridExperts::LayerSlots {
  Weight matrices[3];  // gate, up, down
};

// Slots for experts copied over PCIe, one set per combination of tensor types (layers may differ), in two halves
// of their own weights: an op waits for the copies into the weights it reads, so the copies into one half do not
// hold up the experts running from the other.
// With --expert-prefetch, also the slots for experts copied ahead of their layer's routing, a set per layer parity.
struct HybridExperts::StagingSet {
  std::vector<uint32_t> types;
  Weight halves[2][3];
  int32_t slots_per_half = 0;
  Weight ahead[2][3];
  int32_t ahead_slots = 0;
};

struct HybridExperts::StepBuffers {
  StepBuffers(Backend& device, Backend& pool, const ModelConfig& c, int32_t max_batch)
      : device_ids(device, floats(max_batch, c.n_expert_used)),
        device_weights(device, floats(max_batch, c.n_expert_used)),
        staged_ids(device, floats(max_batch, c.n_expert_used)),
        staged_weights(device, floats(max_batch, c.n_expert_used)),
        staged_out(device, floats(max_batch, c.n_embd)),
        pool_result(device, floats(max_batch, c.n_embd)),
        ahead_ids(device, floats(max_batch, c.n_expert_used)),
        ahead_weights(device, floats(max_batch, c.n_expert_used)),
        predicted_logits(device, floats(max_batch, c.n_expert)),
        predicted_ids(device, floats(max_batch, c.n_expert_used)),
        predicted_weights(device, floats(max_batch, c.n_expert_used)),
        pool_x(pool, floats(max_batch, c.n_embd)),
        pool_ids(pool, floats(max_batch, c.n_expert_used)),
        pool_weights(pool, floats(max_batch, c.n_expert_used)),
        pool_out(pool, floats(max_batch, c.n_embd)),
        pool_host(device.host_alloc(floats(max_batch, c.n_embd))),
        signal_memory(device.host_alloc(sizeof(uint64_t))) {
    std::atomic_ref(signal()).store(0, std::memory_order_relaxed);
  }
  Buffer device_ids, device_weights, staged_ids, staged_weights, staged_out, pool_result, ahead_ids, ahead_weights;
  Buffer predicted_logits, predicted_ids, predicted_weights;  // the next layer's router on this layer's input
  Buffer pool_x, pool_ids, pool_weights, pool_out;
  // Host copies: the router's choices, the experts' input, each tier's share of the pairs, the next layer's
  // predicted choices.
  std::vector<int32_t> ids, slot_ids, staged_slot_ids, ahead_slot_ids, predicted;
  std::vector<float> weights, slot_weights, staged_weights_host, ahead_weights_host, pool_weights_host, x;
  // The pool's result, and the count of pool runs finished (raised as each ends, however it ends), in the device's
  // host_alloc memory: a signalled_write copies the one once the other reaches its ticket.
  HostMemory pool_host, signal_memory;
  uint64_t tickets = 0;  // pool runs started
  float* pool_result_host() const { return static_cast<float*>(pool_host.get()); }
  uint64_t& signal() const { return *static_cast<uint64_t*>(signal_memory.get()); }
};

HybridExperts::HybridExperts(Backend& device, Backend& pool, const gguf::Model& file, const ExpertStore& store,
                             const ModelConfig& config, const ModelWeights& weights, ExpertCacheOptions options)
    : device_(device),
      pool_(pool),
      store_(store),
      expert_file_bytes_(expert_bytes_per_layer(file, config.n_layer, config.n_expert)),
      config_(config),
      weights_(weights),
      options_(std::move(options)),
      layers_(config.n_layer) {
  if (!device.has_expert_cache()) {
    throw Error(device.name() +
                " cannot hold an expert cache (it offers no weight_alloc, weight_write and weight_writes_done): "
                "use --expert-cache off");
  }
  if (options_.pcie_fraction && !(*options_.pcie_fraction >= 0.0 && *options_.pcie_fraction <= 1.0)) {
    throw Error("--pcie-frac must be auto or in [0, 1], not " + std::to_string(*options_.pcie_fraction));
  }
  if (options_.pcie_min_tokens < 0 || options_.pcie_slots < 0 || options_.prefetch < 0) {
    throw Error("--pcie-min-tokens, --pcie-slots and --expert-prefetch must be 0 or more");
  }
  if (options_.adapt.every < 0 || options_.adapt.swaps < 0 || !(options_.adapt.decay >= 0.0) ||
      options_.adapt.decay > 1.0) {
    throw Error("the adaptive tier needs --adapt-every >= 0, --adapt-swaps >= 0 and --adapt-decay in [0, 1]");
  }
  if (!options_.profile.empty() &&
      (options_.profile.n_layer() != config.n_layer || options_.profile.n_expert() != config.n_expert)) {
    throw Error("the expert profile counts " + std::to_string(options_.profile.n_layer()) + " layers of " +
                std::to_string(options_.profile.n_expert()) + " experts; the model has " +
                std::to_string(config.n_layer) + " of " + std::to_string(config.n_expert));
  }
  if (options_.adapt.every > 0) recent_ = RoutingCounts(config.n_layer, config.n_expert);
  if (options_.pool_thread.value_or(false)) pool_thread_ = std::make_unique<SideThread>(options_.poll);
}

HybridExperts::~HybridExperts() = default;

std::shared_ptr<HybridExperts::StepBuffers> HybridExperts::make_buffers(int32_t max_batch) {
  return std::make_shared<StepBuffers>(device_, pool_, config_, max_batch);
}

// The three tensor types of a layer's experts: layers of the same types take the same slot bytes and staging.
std::vector<uint32_t> HybridExperts::types_of(int32_t layer) const {
  return {store_.tensor(layer, 0).type, store_.tensor(layer, 1).type, store_.tensor(layer, 2).type};
}

int64_t HybridExperts::device_bytes_of_expert(int32_t layer) {
  const std::vector<uint32_t> types = types_of(layer);
  for (const auto& [probed, bytes] : probed_bytes_) {
    if (probed == types) return bytes;
  }
  // What one expert takes on the device, in the layout the backend keeps for a cache: one slot of each matrix
  // allocated and measured (the file's bytes where the backend does not say).
  auto bytes = static_cast<int64_t>(expert_file_bytes_[layer]);
  const auto before = device_.memory_info();
  {
    std::vector<Weight> probes;
    for (int m = 0; m < 3; ++m) {
      strata_weight_desc desc = desc_of(layer, m);
      desc.ne2 = 1;
      desc.data = nullptr;
      probes.push_back(Weight::allocate(device_, desc));
    }
    if (const auto after = device_.memory_info(); before && after && after->used_bytes > before->used_bytes) {
      bytes = static_cast<int64_t>(after->used_bytes - before->used_bytes);
    }
  }
  probed_bytes_.emplace_back(types, bytes);
  return bytes;
}

// A layer's expert tensor as the file shapes it, its bytes where the store has them.
strata_weight_desc HybridExperts::desc_of(int32_t layer, int matrix) const {
  const gguf::TensorInfo& tensor = store_.tensor(layer, matrix);
  return {sizeof(strata_weight_desc),
          tensor.name.c_str(),
          tensor.type,
          static_cast<int64_t>(tensor.shape[0]),
          static_cast<int64_t>(tensor.shape[1]),
          static_cast<int64_t>(tensor.shape[2]),
          store_.data(tensor)};
}

int64_t HybridExperts::scratch_reserve(const ModelConfig& config, int32_t max_batch) {
  const int64_t routed_rows = int64_t{max_batch} * config.n_expert_used;
  return routed_rows * (2 * config.expert_ffn + config.n_embd) * 6 +
         int64_t{max_batch} * (config.n_embd + config.n_vocab) * 4 * 2;
}

int64_t HybridExperts::automatic_slots(int32_t max_batch) {
  const auto info = device_.memory_info();
  if (!info) throw Error(device_.name() + " does not say how much memory it has: give --expert-cache a slot count");
  const int64_t free = info->limit_bytes > info->used_bytes ? int64_t(info->limit_bytes - info->used_bytes) : 0;
  const int64_t scratch = scratch_reserve(config_, max_batch);
  int64_t per_slot = 1;
  for (int32_t layer = 0; layer < config_.n_layer; ++layer)
    per_slot = std::max(per_slot, device_bytes_of_expert(layer));
  const int64_t slots = std::max<int64_t>(0, free - scratch) / per_slot;
  log().info("expert cache auto: {} free, {} reserved -> {} slots", gib(free), mib(scratch),
             std::min<int64_t>(slots, int64_t{config_.n_layer} * config_.n_expert));
  return slots;
}

void HybridExperts::place(int32_t max_batch) {
  if (placed_) return;
  try {
    allocate_and_fill(max_batch);
    pcie_share_ = options_.pcie_fraction ? *options_.pcie_fraction : measure_pcie_share();
  } catch (...) {
    // Nothing of a failed placement stays on the device; the next session tries again.
    layers_.clear();
    layers_.resize(config_.n_layer);
    staging_.clear();
    throw;
  }
  placed_ = true;
  log().info("{}", describe());
}

void HybridExperts::allocate_and_fill(int32_t max_batch) {
  if (options_.pcie_fraction.value_or(1.0) > 0.0 || options_.pcie_min_tokens > 0 || options_.prefetch > 0) {
    for (int32_t layer = 0; layer < config_.n_layer; ++layer) staging_for(layer);
  }
  const int64_t slots = options_.slots ? *options_.slots : automatic_slots(max_batch);
  plan_ = ExpertPlan::rank(config_.n_layer, config_.n_expert, slots, options_.profile);
  if (options_.slots) check_fits();
  const auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  int64_t filled = 0;
  for (int32_t layer = 0; layer < config_.n_layer; ++layer) {
    fill_layer(layer);
    filled += plan_.slots(layer);
    if (std::chrono::steady_clock::now() - last_report > kProgressInterval) {
      last_report = std::chrono::steady_clock::now();
      log().info("expert cache: {} of {} slots filled ({:.0f} s)", filled, plan_.total_slots(), ms_since(start) / 1e3);
    }
  }
}

// A cache of a given size is checked before any of it is allocated: one that cannot fit fails with the numbers
// (an automatic size fits by construction).
void HybridExperts::check_fits() {
  const auto info = device_.memory_info();
  if (!info) return;  // the allocation itself then says
  int64_t needed = 0;
  for (int32_t layer = 0; layer < config_.n_layer; ++layer) {
    if (plan_.slots(layer) > 0) needed += plan_.slots(layer) * device_bytes_of_expert(layer);
  }
  const int64_t free = info->limit_bytes > info->used_bytes ? int64_t(info->limit_bytes - info->used_bytes) : 0;
  if (needed > free) {
    throw Error(
        fmt::format("{}: an expert cache of {} slots needs {}, but {} of the device's {} are free after the "
                    "other weights, the KV cache and the buffers (use --expert-cache auto, fewer slots, or a "
                    "smaller --ctx)",
                    device_.name(), plan_.total_slots(), gib(static_cast<double>(needed)),
                    gib(static_cast<double>(free)), gib(static_cast<double>(info->limit_bytes))));
  }
}

void HybridExperts::fill_layer(int32_t layer) {
  LayerSlots& slots = layers_[layer];
  if (plan_.whole_layer(layer)) {
    // The file's tensors loaded as they are, in the backend's own layout (a GPU's repacked IQ3_S, faster): the
    // layer runs as without placement. That layout may be larger than the slots the plan counted; where it does
    // not fit, the slots below hold the experts in order instead, in the file's layout.
    try {
      for (int m = 0; m < 3; ++m) slots.matrices[m] = Weight(device_, desc_of(layer, m));
      return;
    } catch (const Error& error) {
      for (Weight& matrix : slots.matrices) matrix = Weight();
      log().info("expert cache: layer {}'s experts in the file's layout ({})", layer, error.what());
    }
  }
  if (plan_.slots(layer) == 0) return;
  for (int m = 0; m < 3; ++m) {
    strata_weight_desc desc = desc_of(layer, m);
    desc.ne2 = plan_.slots(layer);
    slots.matrices[m] = Weight::allocate(device_, desc);
  }
  for (int32_t slot = 0; slot < plan_.slots(layer); ++slot) {
    write_expert(slots.matrices, slot, layer, plan_.expert_in(layer, slot), false);
  }
}

void HybridExperts::write_expert(const Weight (&target)[3], int32_t slot, int32_t layer, int32_t expert,
                                 bool background) {
  for (int m = 0; m < 3; ++m) device_.write_matrix(target[m], slot, store_.expert_matrix(layer, m, expert), background);
}

HybridExperts::StagingSet& HybridExperts::staging_for(int32_t layer) {
  const std::vector<uint32_t> types = types_of(layer);
  for (const auto& set : staging_) {
    if (set->types == types) return *set;
  }
  auto set = std::make_unique<StagingSet>();
  set->types = types;
  const int32_t slots =
      std::min(config_.n_expert,
               options_.pcie_slots > 0 ? options_.pcie_slots : config_.n_expert_used * kStagingSlotsPerUsedExpert);
  set->slots_per_half = std::max(1, slots / 2);
  set->ahead_slots = std::min(config_.n_expert, options_.prefetch);
  const auto allocate = [&](Weight(&matrices)[3], const char* purpose, int32_t slot_count) {
    for (int m = 0; m < 3; ++m) {
      strata_weight_desc desc = desc_of(layer, m);
      const std::string name = purpose + std::string(desc.name);
      desc.name = name.c_str();
      desc.ne2 = slot_count;
      desc.data = nullptr;
      matrices[m] = Weight::allocate(device_, desc);
    }
  };
  for (auto& half : set->halves) allocate(half, "PCIe staging of ", set->slots_per_half);
  if (set->ahead_slots > 0) {
    for (auto& ahead : set->ahead) allocate(ahead, "prefetch slots of ", set->ahead_slots);
  }
  staging_.push_back(std::move(set));
  return *staging_.back();
}

bool HybridExperts::splits_layers() const {
  for (int32_t layer = 0; layer < config_.n_layer; ++layer) {
    if (!plan_.whole_layer(layer)) return true;
  }
  return false;
}

void HybridExperts::run(int32_t layer, int32_t n, const Buffer& normed, const Buffer& ids, const Buffer& weights,
                        Buffer& out, StepBuffers& b, const RoutingObserver& observer, const ExpertRouter& route) {
  const auto& t = device_.table();
  const int32_t n_used = config_.n_expert_used;
  const auto pairs = static_cast<size_t>(n) * n_used;
  const Weight(&cached)[3] = layers_[layer].matrices;
  if (plan_.whole_layer(layer)) {
    settle_pool();  // b is free again
    if (observer) {
      b.ids.resize(pairs);
      device_.read(ids, b.ids.data(), pairs * sizeof(int32_t));
      observer(layer, b.ids);
    }
    device_moe(n, normed, ids, weights, cached, out);
    stats_.device_pairs += static_cast<int64_t>(pairs);
    return;
  }
  step_split_ = true;

  // The router's choices on the host, the next layer's predicted ones (queued before), and where the pool will
  // likely have pairs its input: one wait for the device. A step whose misses all go over PCIe reads no input.
  const bool predicting = prefetches_after(layer, n);
  if (predicting) route(layer + 1, normed, b.predicted_logits, b.predicted_ids, b.predicted_weights);
  settle_pool();  // the split layer before's pool, queued behind it, is done with b
  auto start = std::chrono::steady_clock::now();
  b.ids.resize(pairs);
  b.weights.resize(pairs);
  b.predicted.resize(predicting ? pairs : 0);
  const bool streams_misses = pcie_share_ >= 1.0 || copied_for_tokens(n);
  b.x.resize(streams_misses ? 0 : static_cast<size_t>(n) * config_.n_embd);
  const std::array<Backend::BufferRead, 4> reads = {
      {{&ids, b.ids.data(), pairs * sizeof(int32_t)},
       {&weights, b.weights.data(), pairs * sizeof(float)},
       {&b.predicted_ids, b.predicted.data(), b.predicted.size() * sizeof(int32_t)},
       {&normed, b.x.data(), b.x.size() * sizeof(float)}}};
  device_.read_all(reads);
  stats_.sync_ms += ms_since(start);
  trace("caller", "read routing", start, layer);
  const auto split_start = Clock::now();
  if (observer) observer(layer, b.ids);
  if (!recent_.empty()) recent_.add(layer, b.ids);

  // Each pair to one tier: a zero weight hides it from the others. A missed expert copied ahead (its slot in the
  // ahead set) runs there.
  const Ahead& ahead = ahead_[layer % 2];
  std::vector<int32_t> ahead_slot(config_.n_expert, -1);
  if (ahead.layer == layer) {
    for (size_t k = 0; k < ahead.experts.size(); ++k) ahead_slot[ahead.experts[k]] = static_cast<int32_t>(k);
  }
  b.slot_ids.assign(pairs, 0);
  b.slot_weights.assign(pairs, 0.0f);
  b.ahead_slot_ids.assign(pairs, 0);
  b.ahead_weights_host.assign(pairs, 0.0f);
  b.pool_weights_host.assign(pairs, 0.0f);
  int64_t hits = 0, ahead_pairs = 0, staged = 0, pooled = 0;
  std::vector<int32_t> missed_tokens(config_.n_expert, 0);
  std::vector<bool> ahead_used(ahead.experts.size(), false);
  for (size_t p = 0; p < pairs; ++p) {
    const int32_t slot = plan_.slot_of(layer, b.ids[p]);
    if (slot >= 0) {
      b.slot_ids[p] = slot;
      b.slot_weights[p] = b.weights[p];
      ++hits;
    } else if (const int32_t copied = ahead_slot[b.ids[p]]; copied >= 0) {
      b.ahead_slot_ids[p] = copied;
      b.ahead_weights_host[p] = b.weights[p];
      ahead_used[copied] = true;
      ++ahead_pairs;
    } else {
      ++missed_tokens[b.ids[p]];
    }
  }
  stats_.prefetch_used += std::count(ahead_used.begin(), ahead_used.end(), true);
  // The PCIe share: every missed expert with at least pcie_min_tokens tokens in the step (a prompt's: a copy costs
  // less than the pool's work on them), and the share pcie_fraction of the others, those with the most tokens.
  std::vector<int32_t> staged_index(config_.n_expert, -1);  // an expert's place among the staged
  std::vector<int32_t> staged_experts;
  std::vector<int32_t> missed;
  for (int32_t e = 0; e < config_.n_expert; ++e) {
    if (missed_tokens[e] > 0) missed.push_back(e);
  }
  std::stable_sort(missed.begin(), missed.end(),
                   [&](int32_t a, int32_t c) { return missed_tokens[a] > missed_tokens[c]; });
  const auto share = static_cast<size_t>(std::ceil(pcie_share_ * static_cast<double>(missed.size())));
  for (size_t k = 0; k < missed.size(); ++k) {
    const bool many_tokens = copied_for_tokens(missed_tokens[missed[k]]);
    if (k < share || many_tokens) {
      staged_index[missed[k]] = static_cast<int32_t>(staged_experts.size());
      staged_experts.push_back(missed[k]);
    }
  }
  for (size_t p = 0; p < pairs; ++p) {
    if (plan_.slot_of(layer, b.ids[p]) >= 0 || ahead_slot[b.ids[p]] >= 0) continue;
    if (staged_index[b.ids[p]] >= 0) {
      ++staged;
    } else {
      b.pool_weights_host[p] = b.weights[p];
      ++pooled;
    }
  }

  // The pool's input where it was not read with the routing, before the device's part is queued (a read waits for
  // what is queued).
  if (pooled > 0 && b.x.empty()) {
    start = std::chrono::steady_clock::now();
    b.x.resize(static_cast<size_t>(n) * config_.n_embd);
    device_.read(normed, b.x.data(), b.x.size() * sizeof(float));
    stats_.sync_ms += ms_since(start);
    trace("caller", "read pool input", start, layer);
  }
  trace("caller", "split", split_start, layer);

  // The device's part: the first staging half's copies (on the device's copy stream, beside everything queued after
  // them), the next layer's copies ahead (a copy waits for the ops queued before it, so before any op of this
  // layer), the resident experts, those copied ahead, then the staged experts a half at a time, each half's copies
  // queued before the experts of the half before run.
  bool device_wrote = false;
  const auto add_to_out = [&](const Buffer& part) {
    device_.run("add", [&](strata_error* e) {
      return t.add(device_.get(), out.get(), part.get(), int64_t{n} * config_.n_embd, out.get(), e);
    });
  };
  const auto queue_device_part = [&] {
    const auto queue_start = std::chrono::steady_clock::now();
    // One tier's pairs on the device (the others' weights zero), into out or added to it.
    const auto device_part = [&](Buffer& device_ids, const std::vector<int32_t>& slot_ids, Buffer& device_weights,
                                 const std::vector<float>& slot_weights, const Weight(&matrices)[3]) {
      device_.write(device_ids, slot_ids.data(), pairs * sizeof(int32_t));
      device_.write(device_weights, slot_weights.data(), pairs * sizeof(float));
      device_moe(n, normed, device_ids, device_weights, matrices, device_wrote ? b.staged_out : out);
      if (device_wrote) add_to_out(b.staged_out);
      device_wrote = true;
    };
    StagingSet* staging = staged_experts.empty() && ahead_pairs == 0 ? nullptr : &staging_for(layer);
    const size_t per_half = staging != nullptr ? static_cast<size_t>(staging->slots_per_half) : 1;
    const size_t n_halves = (staged_experts.size() + per_half - 1) / per_half;  // halves filled in turn
    const auto copy_in = [&](size_t turn) {
      const size_t first = turn * per_half, count = std::min(per_half, staged_experts.size() - first);
      stage(staging->halves[turn % 2], layer, std::span(staged_experts).subspan(first, count));
      stats_.pcie_bytes += static_cast<int64_t>(count * expert_file_bytes_[layer]);
    };
    if (n_halves > 0) copy_in(0);
    if (predicting && n_halves <= 1) prefetch_next(layer, b);
    if (hits > 0) device_part(b.device_ids, b.slot_ids, b.device_weights, b.slot_weights, cached);
    if (ahead_pairs > 0) {
      device_part(b.ahead_ids, b.ahead_slot_ids, b.ahead_weights, b.ahead_weights_host, staging->ahead[layer % 2]);
    }
    for (size_t turn = 0; turn < n_halves; ++turn) {
      if (turn + 1 < n_halves) copy_in(turn + 1);
      const auto first = static_cast<int32_t>(turn * per_half);
      const auto last = static_cast<int32_t>(std::min(staged_experts.size(), (turn + 1) * per_half));
      b.staged_slot_ids.assign(pairs, 0);
      b.staged_weights_host.assign(pairs, 0.0f);
      for (size_t p = 0; p < pairs; ++p) {
        const int32_t index = staged_index[b.ids[p]];  // -1 for resident, ahead and pooled experts
        if (index >= first && index < last) {
          b.staged_slot_ids[p] = index - first;
          b.staged_weights_host[p] = b.weights[p];
        }
      }
      device_part(b.staged_ids, b.staged_slot_ids, b.staged_weights, b.staged_weights_host, staging->halves[turn % 2]);
    }
    stats_.queue_ms += ms_since(queue_start);
    trace("caller", "queue device part", queue_start, layer);
  };
  // The pool, on its own thread where it has one while the caller queues the device's part (else after it, on the
  // caller). Where the device offers signalled_write the caller does not wait for it either: the pool's result is
  // copied behind a device-side wait for its signal, and the next layer's ops are queued meanwhile (the next split
  // layer, or the step's end, settles the pool on the host).
  if (pooled > 0) {
    const uint64_t ticket = ++b.tickets;
    const bool signalled = options_.device_waits_for_pool && device_.has_signalled_write();
    if (pool_thread_ != nullptr) {
      pool_pending_ = true;
      pool_run_ = {layer, n, &b, ticket};
      pool_thread_->start([this] { run_pool(pool_run_.layer, pool_run_.n, *pool_run_.buffers, pool_run_.ticket); });
      try {
        queue_device_part();
      } catch (...) {
        abandon_pool();  // the pool's thread is done with b before it goes; the device's error is reported
        throw;
      }
      if (!signalled) settle_pool();
    } else {
      queue_device_part();
      run_pool(layer, n, b, ticket);
      settle_pool();
    }
    start = std::chrono::steady_clock::now();
    Buffer& target = device_wrote ? b.pool_result : out;
    const size_t bytes = static_cast<size_t>(n) * config_.n_embd * sizeof(float);
    if (signalled) {
      device_.write_when_signalled(target, b.pool_result_host(), bytes, &b.signal(), ticket);
    } else {
      device_.write(target, b.pool_result_host(), bytes);
    }
    if (device_wrote) add_to_out(b.pool_result);
    stats_.sync_ms += ms_since(start);
    trace("caller", signalled ? "queue pool result" : "write pool result", start, layer);
  } else {
    queue_device_part();
  }
  stats_.device_pairs += hits;
  stats_.pcie_pairs += ahead_pairs + staged;
  stats_.pool_pairs += pooled;
}

bool HybridExperts::copied_for_tokens(int64_t tokens) const {
  return options_.pcie_min_tokens > 0 && tokens >= options_.pcie_min_tokens;
}

bool HybridExperts::prefetches_after(int32_t layer, int32_t n) const {
  const int32_t next = layer + 1;
  return options_.prefetch > 0 && next < config_.n_layer && !plan_.whole_layer(next) &&
         plan_.slots(next) < config_.n_expert && !copied_for_tokens(n);
}

void HybridExperts::prefetch_next(int32_t layer, StepBuffers& b) {
  const int32_t next = layer + 1, n_used = config_.n_expert_used;
  // The tokens that chose each expert, and its best place in a token's choices (best first): ties go to the likelier.
  std::vector<int32_t> tokens(config_.n_expert, 0), best_place(config_.n_expert, n_used);
  for (size_t p = 0; p < b.predicted.size(); ++p) {
    const int32_t e = b.predicted[p];
    if (e < 0 || e >= config_.n_expert) continue;
    ++tokens[e];
    best_place[e] = std::min(best_place[e], static_cast<int32_t>(p % n_used));
  }
  std::vector<int32_t> missed;
  for (int32_t e = 0; e < config_.n_expert; ++e) {
    if (tokens[e] > 0 && !plan_.resident(next, e)) missed.push_back(e);
  }
  std::sort(missed.begin(), missed.end(), [&](int32_t a, int32_t c) {
    return std::tuple(-tokens[a], best_place[a], a) < std::tuple(-tokens[c], best_place[c], c);
  });
  StagingSet& staging = staging_for(next);
  missed.resize(std::min(missed.size(), static_cast<size_t>(staging.ahead_slots)));
  Ahead& ahead = ahead_[next % 2];
  ahead.layer = next;
  ahead.experts = missed;
  stage(staging.ahead[next % 2], next, missed);
  stats_.prefetched += static_cast<int64_t>(missed.size());
  stats_.pcie_bytes += static_cast<int64_t>(missed.size() * expert_file_bytes_[next]);
}

void HybridExperts::stage(const Weight (&target)[3], int32_t layer, std::span<const int32_t> experts) {
  for (int m = 0; m < 3; ++m) {
    for (size_t k = 0; k < experts.size(); ++k) {
      device_.write_matrix(target[m], static_cast<int32_t>(k), store_.expert_matrix(layer, m, experts[k]), false);
    }
  }
}

void HybridExperts::device_moe(int32_t n, const Buffer& x, const Buffer& ids, const Buffer& weights,
                               const Weight (&matrices)[3], Buffer& result) {
  const auto& t = device_.table();
  device_.run("moe_ffn", [&](strata_error* e) {
    return t.moe_ffn(device_.get(), x.get(), n, config_.n_expert_used, ids.get(), weights.get(), matrices[0].get(),
                     matrices[1].get(), matrices[2].get(), result.get(), e);
  });
}

void HybridExperts::run_pool(int32_t layer, int32_t n, StepBuffers& b, uint64_t ticket) {
  // Raised however the pool ends: a device waiting for it must never hang (the error comes back from settle_pool).
  struct Signal {
    uint64_t& signal;
    uint64_t ticket;
    ~Signal() { std::atomic_ref(signal).store(ticket, std::memory_order_release); }
  } raise_signal{b.signal(), ticket};
  const auto start = std::chrono::steady_clock::now();
  pool_moe(layer, n, b, b.ids.data(), b.pool_weights_host.data());
  unsettled_pool_ms_ += ms_since(start);
  trace(pool_thread_ != nullptr ? "pool" : "caller", "pool", start, layer);
}

void HybridExperts::settle_pool() {
  if (pool_pending_) {
    pool_pending_ = false;
    const auto start = Clock::now();
    pool_thread_->wait();
    trace("caller", "wait for pool", start, pool_run_.layer);
  }
  stats_.pool_ms += std::exchange(unsettled_pool_ms_, 0.0);
}

void HybridExperts::abandon_pool() noexcept {
  if (!pool_pending_) return;
  pool_pending_ = false;
  pool_thread_->finish();
}

void HybridExperts::abandon_step() noexcept { abandon_pool(); }

void HybridExperts::pool_moe(int32_t layer, int32_t n, StepBuffers& b, const int32_t* ids, const float* weights) {
  const size_t pairs = static_cast<size_t>(n) * config_.n_expert_used;
  const LayerWeights& w = weights_.layers[layer];
  const auto& pt = pool_.table();
  pool_.write(b.pool_x, b.x.data(), b.x.size() * sizeof(float));
  pool_.write(b.pool_ids, ids, pairs * sizeof(int32_t));
  pool_.write(b.pool_weights, weights, pairs * sizeof(float));
  pool_.run("moe_ffn", [&](strata_error* e) {
    return pt.moe_ffn(pool_.get(), b.pool_x.get(), n, config_.n_expert_used, b.pool_ids.get(), b.pool_weights.get(),
                      w.gate_exps.get(), w.up_exps.get(), w.down_exps.get(), b.pool_out.get(), e);
  });
  pool_.read(b.pool_out, b.pool_result_host(), static_cast<size_t>(n) * config_.n_embd * sizeof(float));
}

// The copies and the pool run side by side, so a decode step is quickest when both take as long: with a staged
// expert costing c and a pooled one p, the share p / (p + c) of the misses over PCIe. Each is timed on one token
// through up to n_used missed experts of the first split layer, end to end (the copies, or the input's writes, the
// experts and the result read back), the best of a few runs after a first that warms up.
double HybridExperts::measure_pcie_share() {
  int32_t layer = 0;
  while (layer < config_.n_layer && (plan_.whole_layer(layer) || plan_.slots(layer) == config_.n_expert)) ++layer;
  if (layer == config_.n_layer) return 0.0;  // nothing misses
  StagingSet& staging = staging_for(layer);
  const size_t wanted = static_cast<size_t>(std::min(config_.n_expert_used, staging.slots_per_half));
  std::vector<int32_t> missed;
  for (int32_t e = 0; e < config_.n_expert && missed.size() < wanted; ++e) {
    if (!plan_.resident(layer, e)) missed.push_back(e);
  }
  const auto count = static_cast<int32_t>(missed.size());
  const int32_t n_used = config_.n_expert_used;
  // One token choosing the missed experts (slots 0 .. count - 1 when staged), with equal weights.
  const std::shared_ptr<StepBuffers> b = make_buffers(1);
  b->x.resize(static_cast<size_t>(config_.n_embd));
  for (size_t i = 0; i < b->x.size(); ++i) b->x[i] = 0.01f * static_cast<float>(static_cast<int64_t>(i % 7) - 3);
  std::vector<float> weights(n_used, 0.0f);
  std::vector<int32_t> slot_ids(n_used, 0), expert_ids(n_used, missed[0]);
  for (int32_t j = 0; j < count; ++j) {
    slot_ids[j] = j;
    expert_ids[j] = missed[j];
    weights[j] = 1.0f / static_cast<float>(count);
  }
  const auto best_of_runs = [](const std::function<void()>& run) {
    double best = 1e300;
    for (int attempt = 0; attempt < 4; ++attempt) {
      const auto start = std::chrono::steady_clock::now();
      run();
      if (attempt > 0) best = std::min(best, ms_since(start));
    }
    return best;
  };
  std::vector<float> staged_result(b->x.size());
  device_.write(b->pool_result, b->x.data(), b->x.size() * sizeof(float));  // a device buffer for the input
  device_.write(b->staged_ids, slot_ids.data(), slot_ids.size() * sizeof(int32_t));
  device_.write(b->staged_weights, weights.data(), weights.size() * sizeof(float));
  const double staged_ms = best_of_runs([&] {
    stage(staging.halves[0], layer, missed);
    device_moe(1, b->pool_result, b->staged_ids, b->staged_weights, staging.halves[0], b->staged_out);
    device_.read(b->staged_out, staged_result.data(), staged_result.size() * sizeof(float));
  });
  const double pooled_ms = best_of_runs([&] { pool_moe(layer, 1, *b, expert_ids.data(), weights.data()); });
  const double share = pooled_ms / (pooled_ms + std::max(staged_ms, 1e-6));
  log().info("--pcie-frac auto: {} missed experts of layer {} staged in {:.3f} ms, pooled in {:.3f} ms -> {:.2f}",
             count, layer, staged_ms, pooled_ms, share);
  return share;
}

void HybridExperts::end_step() {
  settle_pool();
  if (step_split_) ++stats_.steps;
  step_split_ = false;
  for (Ahead& ahead : ahead_) ahead.layer = -1;  // copied for this step's tokens
  if (recent_.empty()) return;
  ++steps_since_round_;
  if (!pending_.empty()) {
    if (device_.writes_done()) finish_adapt_round();
  } else if (steps_since_round_ >= options_.adapt.every) {
    steps_since_round_ = 0;
    start_adapt_round();
  }
  recent_.scale(options_.adapt.decay);
}

// Swaps within layers (a layer's slot count is fixed when the cache is placed): in each split layer the
// coldest resident experts give their slots to hotter ones, the largest gains first, at most adapt.swaps. A
// victim leaves the plan at once (its pairs go to the other tiers); its newcomer joins once the copies are done.
void HybridExperts::start_adapt_round() {
  struct Swap {
    double gain;
    int32_t layer, slot, expert;
  };
  std::vector<Swap> swaps;
  for (int32_t layer = 0; layer < config_.n_layer; ++layer) {
    if (plan_.whole_layer(layer) || plan_.slots(layer) == 0) continue;
    std::vector<int32_t> residents, others;
    for (int32_t e = 0; e < config_.n_expert; ++e) (plan_.resident(layer, e) ? residents : others).push_back(e);
    const auto count = [&](int32_t e) { return recent_.at(layer, e); };
    std::sort(residents.begin(), residents.end(), [&](int32_t a, int32_t c) { return count(a) < count(c); });
    std::sort(others.begin(), others.end(), [&](int32_t a, int32_t c) { return count(a) > count(c); });
    for (size_t k = 0; k < std::min(residents.size(), others.size()); ++k) {
      if (count(others[k]) <= count(residents[k]) * kSwapMargin || count(others[k]) <= 0.0) break;
      swaps.push_back({count(others[k]) - count(residents[k]), layer, plan_.slot_of(layer, residents[k]), others[k]});
    }
  }
  std::sort(swaps.begin(), swaps.end(), [](const Swap& a, const Swap& c) { return a.gain > c.gain; });
  if (swaps.size() > static_cast<size_t>(options_.adapt.swaps)) swaps.resize(options_.adapt.swaps);
  if (swaps.empty()) return;
  round_start_ = Clock::now();
  for (const Swap& swap : swaps) {
    plan_.assign(swap.layer, swap.slot, -1);
    write_expert(layers_[swap.layer].matrices, swap.slot, swap.layer, swap.expert, true);
    pending_.push_back({swap.layer, swap.slot, swap.expert});
  }
}

void HybridExperts::finish_adapt_round() {
  for (const PendingSwap& swap : pending_) plan_.assign(swap.layer, swap.slot, swap.expert);
  const double ms = ms_since(round_start_);
  ++stats_.adapt_rounds;
  stats_.adapt_swapped += static_cast<int64_t>(pending_.size());
  stats_.adapt_round_ms_sum += ms;
  stats_.adapt_round_ms_max = std::max(stats_.adapt_round_ms_max, ms);
  log().info("expert cache: round {} swapped {} experts in {:.1f} ms", stats_.adapt_rounds, pending_.size(), ms);
  pending_.clear();
}

ExpertStats ExpertStats::since(const ExpertStats& earlier) const {
  ExpertStats d = *this;
  d.steps -= earlier.steps;
  d.device_pairs -= earlier.device_pairs;
  d.pcie_pairs -= earlier.pcie_pairs;
  d.pool_pairs -= earlier.pool_pairs;
  d.pcie_bytes -= earlier.pcie_bytes;
  d.prefetched -= earlier.prefetched;
  d.prefetch_used -= earlier.prefetch_used;
  d.pool_ms -= earlier.pool_ms;
  d.sync_ms -= earlier.sync_ms;
  d.queue_ms -= earlier.queue_ms;
  d.adapt_rounds -= earlier.adapt_rounds;
  d.adapt_swapped -= earlier.adapt_swapped;
  d.adapt_round_ms_sum -= earlier.adapt_round_ms_sum;
  return d;
}

nlohmann::ordered_json ExpertStats::to_json() const {
  const double per_step = steps > 0 ? 1.0 / static_cast<double>(steps) : 0.0;
  return {{"hit_rate", hit_rate()},
          {"pairs_device", device_pairs},
          {"pairs_pcie", pcie_pairs},
          {"pairs_pool", pool_pairs},
          {"split_steps", steps},
          {"pool_ms_per_step", pool_ms * per_step},
          {"sync_ms_per_step", sync_ms * per_step},
          {"queue_ms_per_step", queue_ms * per_step},
          {"pcie_bytes", pcie_bytes},
          {"prefetched", prefetched},
          {"prefetch_used", prefetch_used},
          {"adapt_rounds", adapt_rounds},
          {"adapt_swapped", adapt_swapped},
          {"adapt_round_ms_mean", adapt_rounds > 0 ? adapt_round_ms_sum / static_cast<double>(adapt_rounds) : 0.0},
          {"adapt_round_ms_max", adapt_round_ms_max}};
}

std::string ExpertStats::text() const {
  const double per_step = steps > 0 ? 1.0 / static_cast<double>(steps) : 0.0;
  return fmt::format(
      "experts: hit rate {:.1f}%, pairs {} on the device, {} over PCIe ({}), {} on the pool; per split step "
      "{:.2f} ms pool, {:.2f} ms waiting for the device, {:.2f} ms queueing its part ({} steps); prefetch: {} copied "
      "ahead, {} used; adaptive: {} rounds, {} swapped",
      100.0 * hit_rate(), device_pairs, pcie_pairs, mib(static_cast<double>(pcie_bytes)), pool_pairs,
      pool_ms * per_step, sync_ms * per_step, queue_ms * per_step, steps, prefetched, prefetch_used, adapt_rounds,
      adapt_swapped);
}

std::string HybridExperts::describe() const {
  int32_t whole = 0;
  for (int32_t layer = 0; layer < config_.n_layer; ++layer) whole += plan_.whole_layer(layer) ? 1 : 0;
  const int64_t all = int64_t{config_.n_layer} * config_.n_expert;
  return fmt::format("expert cache: {} of {} experts resident ({:.1f}%), {} layers whole, {} split; {} staging sets",
                     plan_.total_slots(), all, 100.0 * static_cast<double>(plan_.total_slots()) / all, whole,
                     config_.n_layer - whole, staging_.size());
}

}  // namespace strata
