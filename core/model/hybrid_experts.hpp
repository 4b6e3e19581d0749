// Hybrid expert placement (docs/experts.md): the routed experts of a model larger than the GPU. The device
// backend keeps attention, dense and shared weights, the KV cache and an expert cache: slots holding the
// experts that the plan (core/experts/expert_plan.hpp) ranks highest, wherever their layers are. Every other
// expert stays in host memory, where a CPU backend (the expert pool) reads it in place from the mapped file.
// Each step, per layer, the core reads the router's choices back and hands every (token, expert) pair to one
// tier: the device for a resident expert, else a PCIe copy into a staging slot then the device (a share of the
// misses, --pcie-frac), else the pool. The device's part runs while the pool computes (queued before it, or beside
// it where the pool has a thread of its own); their outputs are added. A layer whose experts are all resident runs as
// without placement (no host round trip). With --expert-prefetch, a split layer also runs the next layer's router on
// its own input and copies the experts it predicts ahead, beside the rest of the layer. The adaptive tier moves hot
// experts into the cache between steps.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/backend/backend.hpp"
#include "core/experts/expert_plan.hpp"
#include "core/experts/routing_counts.hpp"
#include "core/gguf/gguf_file.hpp"
#include "core/model/expert_store.hpp"
#include "core/model/model_config.hpp"
#include "core/model/model_weights.hpp"
#include "core/util/side_thread.hpp"
#include "core/util/timeline_trace.hpp"

namespace strata {

// Called with a step's expert choices in one layer: ids is [n_tokens][n_used], best first.
using RoutingObserver = std::function<void(int32_t layer, std::span<const int32_t> ids)>;
// Runs layer's router on normed's rows (as many as the step's tokens) into logits, ids and weights: the session's
// routing, which the next layer's prediction shares.
using ExpertRouter =
    std::function<void(int32_t layer, const Buffer& normed, Buffer& logits, Buffer& ids, Buffer& weights)>;

struct AdaptiveTierOptions {
  int32_t every = 0;    // steps between re-plans; 0: off
  double decay = 0.95;  // each step's factor on the routing counts seen so far
  int32_t swaps = 16;   // experts copied in at most per round
};

struct ExpertCacheOptions {
  std::optional<int64_t> slots;  // the cache's slots; none: as many as the device's free memory holds
  // Share of a step's missed experts copied to the device instead of run on the pool; none: measured when the
  // cache is placed (--pcie-frac auto: the share that keeps the copies and the pool equally busy).
  std::optional<double> pcie_fraction = 0.0;
  int32_t pcie_min_tokens = 8;  // and every missed expert with this many tokens in a step (prompts); 0: none
  int32_t pcie_slots = 0;       // staging slots per set of tensor types; 0: 4 x n_expert_used
  // Missed experts of the next layer copied ahead per split layer of a decode step, as the next router predicts
  // them from this layer's input; 0: none.
  int32_t prefetch = 0;
  RoutingCounts profile;  // ranks the experts for the first placement; empty: uniform
  AdaptiveTierOptions adapt;
  ExpertMemory host_memory = ExpertMemory::automatic;  // the experts' host copy (expert_store.hpp)
  // The pool computes on a thread of its own while the caller queues the device's part of the layer (copies,
  // writes, launches): for a device that computes elsewhere (a GPU). None: the engine's choice (on, except for the
  // CPU standing in for a GPU, whose ops would take the pool's cores).
  std::optional<bool> pool_thread;
  // With a pool thread, on a device that offers signalled_write: the device waits for the pool's result itself (its
  // copy queued behind a wait for the pool's signal) while the caller queues the next layer. Off: the caller waits
  // for the pool, then writes its result (for a device whose wait misbehaves, and to measure the difference).
  bool device_waits_for_pool = true;
  std::chrono::microseconds poll{500};  // how long the caller and that thread poll before they sleep
  // Where set, each split layer's host-side work is recorded there (--trace-experts): the routing read, the split,
  // the queueing of the device's part, the pool's run and the waits for it.
  std::shared_ptr<TimelineTrace> trace;
};

// What the placement did, summed over steps.
struct ExpertStats {
  int64_t steps = 0;  // steps with at least one split layer
  int64_t device_pairs = 0, pcie_pairs = 0, pool_pairs = 0;
  int64_t pcie_bytes = 0;  // expert bytes copied for PCIe pairs (the file's layout), prefetched ones included
  int64_t prefetched = 0, prefetch_used = 0;  // experts copied ahead of their layer's routing; those it chose
  double pool_ms = 0.0;                       // host time the pool computed
  double sync_ms = 0.0;                       // host time waiting for the device: routing read back, results joined
  double queue_ms = 0.0;                      // host time queueing the device's part: copies, writes, launches
  int64_t adapt_rounds = 0, adapt_swapped = 0;
  double adapt_round_ms_max = 0.0, adapt_round_ms_sum = 0.0;  // from a round's first copy to its switch

  int64_t pairs() const { return device_pairs + pcie_pairs + pool_pairs; }
  // The share of pairs served by resident experts.
  double hit_rate() const { return pairs() > 0 ? static_cast<double>(device_pairs) / pairs() : 0.0; }
  // What happened after earlier was taken (a benchmark test's share).
  ExpertStats since(const ExpertStats& earlier) const;
  // For --stats and strata bench --json: the counts, the hit rate, and ms per step.
  nlohmann::ordered_json to_json() const;
  // One line of the same.
  std::string text() const;
};

class HybridExperts {
 public:
  // weights' expert tensors are on pool (load_weights' expert_backend); device must offer the expert cache's
  // named functions (strata/backend.h), else this throws strata::Error naming it.
  HybridExperts(Backend& device, Backend& pool, const gguf::Model& file, const ExpertStore& store,
                const ModelConfig& config, const ModelWeights& weights, ExpertCacheOptions options);
  ~HybridExperts();
  HybridExperts(const HybridExperts&) = delete;
  HybridExperts& operator=(const HybridExperts&) = delete;

  // Sizes and fills the cache, once: the first session calls it after allocating its KV cache and buffers, so
  // that an automatic size takes what is left. Throws strata::Error when a planned size does not fit.
  void place(int32_t max_batch);
  // Whether some layer runs split (not all its experts resident): its steps need the host, so a step is no one graph.
  bool splits_layers() const;
  bool whole_layer(int32_t layer) const { return plan_.whole_layer(layer); }

  // A session's buffers for split layers, for steps of up to max_batch tokens.
  struct StepBuffers;
  std::shared_ptr<StepBuffers> make_buffers(int32_t max_batch);

  // The experts of layer over n tokens: out = moe(normed) with the router's ids and weights (device buffers).
  // route runs another layer's router (for --expert-prefetch).
  void run(int32_t layer, int32_t n, const Buffer& normed, const Buffer& ids, const Buffer& weights, Buffer& out,
           StepBuffers& buffers, const RoutingObserver& observer, const ExpertRouter& route);
  // After every step: the last split layer's pool settled (its error thrown here), the adaptive tier's bookkeeping,
  // copies and switches.
  void end_step();
  // Instead of end_step, for a step that failed: the pool, if it still runs, is waited for quietly, so that the
  // session's buffers may go.
  void abandon_step() noexcept;

  // What an automatic size leaves for the ops' scratch in steps of max_batch tokens, which grows during the first
  // steps: the grouped expert GEMMs' inputs, their f16 copies and results, and a step's activation rows.
  static int64_t scratch_reserve(const ModelConfig& config, int32_t max_batch);

  const ExpertPlan& plan() const { return plan_; }
  const ExpertStats& stats() const { return stats_; }
  // The share of a step's misses copied to the device: --pcie-frac, or what auto measured at placement.
  double pcie_share() const { return pcie_share_; }
  // One line for logs: slots, layers split, bytes per slot.
  std::string describe() const;

 private:
  struct LayerSlots;
  struct StagingSet;
  struct PendingSwap {
    int32_t layer, slot, expert;
  };
  using Clock = std::chrono::steady_clock;

  int64_t device_bytes_of_expert(int32_t layer);
  void allocate_and_fill(int32_t max_batch);
  int64_t automatic_slots(int32_t max_batch);
  void check_fits();
  void fill_layer(int32_t layer);
  // Copies an expert's three matrices from the mapped file into slot of target (gate, up, down).
  void write_expert(const Weight (&target)[3], int32_t slot, int32_t layer, int32_t expert, bool background);
  StagingSet& staging_for(int32_t layer);
  std::vector<uint32_t> types_of(int32_t layer) const;
  strata_weight_desc desc_of(int32_t layer, int matrix) const;
  void start_adapt_round();
  void finish_adapt_round();
  // --pcie-frac auto: one token's missed experts of a split layer timed through each tier.
  double measure_pcie_share();
  // Whether a missed expert with this many tokens in a step goes over PCIe whatever the share (--pcie-min-tokens).
  bool copied_for_tokens(int64_t tokens) const;
  // Whether a step of n tokens in layer predicts the next layer's experts to copy them ahead.
  bool prefetches_after(int32_t layer, int32_t n) const;
  // Copies the predicted experts of layer + 1 that it misses, those most tokens chose first, into its ahead slots.
  void prefetch_next(int32_t layer, StepBuffers& b);
  // Copies experts of layer into target's first slots, matrix by matrix (the writes come in runs into one weight:
  // the CUDA backend marks a run's landing once).
  void stage(const Weight (&target)[3], int32_t layer, std::span<const int32_t> experts);
  // The device's moe_ffn over n tokens of x with the given matrices, ids and weights, into result.
  void device_moe(int32_t n, const Buffer& x, const Buffer& ids, const Buffer& weights, const Weight (&matrices)[3],
                  Buffer& result);
  // The pool's moe_ffn of layer over b.x's n tokens with these ids and weights, into b's pool result.
  void pool_moe(int32_t layer, int32_t n, StepBuffers& b, const int32_t* ids, const float* weights);
  // A split layer's pool run (pool_moe with its pairs), on whichever thread: raises b's signal to ticket when it
  // ends, however it ends, and counts its time for settle_pool.
  void run_pool(int32_t layer, int32_t n, StepBuffers& b, uint64_t ticket);
  // Waits for the pool run on the pool's thread, if any (rethrowing its error), and counts the pool's time.
  void settle_pool();
  void abandon_pool() noexcept;
  // A span of the trace, if any, from start to now.
  void trace(const char* lane, const char* name, Clock::time_point start, int32_t layer) const {
    if (options_.trace) options_.trace->span(lane, name, start, layer);
  }

  Backend& device_;
  Backend& pool_;
  const ExpertStore& store_;                 // the experts' tensors and the bytes copied to the device
  std::vector<uint64_t> expert_file_bytes_;  // one expert's three matrices in each layer, as the file has them
  const ModelConfig& config_;
  const ModelWeights& weights_;
  ExpertCacheOptions options_;
  ExpertPlan plan_;
  bool placed_ = false;
  std::vector<LayerSlots> layers_;
  std::vector<std::unique_ptr<StagingSet>> staging_;
  std::vector<std::pair<std::vector<uint32_t>, int64_t>> probed_bytes_;  // (types and shapes) -> device bytes
  RoutingCounts recent_;                                                 // decayed counts, for the adaptive tier
  int64_t steps_since_round_ = 0;
  std::vector<PendingSwap> pending_;
  Clock::time_point round_start_;
  // The experts copied ahead into the ahead slots of layers of each parity (two sets: a layer's copies must not
  // overwrite the slots the layer before it still reads), and the layer they belong to (-1: none this step).
  struct Ahead {
    int32_t layer = -1;
    std::vector<int32_t> experts;  // by slot
  };
  Ahead ahead_[2];
  ExpertStats stats_;
  bool step_split_ = false;
  double pcie_share_ = 0.0;
  std::unique_ptr<SideThread> pool_thread_;  // options_.pool_thread
  bool pool_pending_ = false;                // a run started there and not yet settled
  // The pool thread's run's arguments: its job captures this alone, small enough for std::function to hold without
  // allocating (a split layer of a decode step allocates nothing).
  struct PoolRun {
    int32_t layer = 0, n = 0;
    StepBuffers* buffers = nullptr;
    uint64_t ticket = 0;
  } pool_run_;
  double unsettled_pool_ms_ = 0.0;  // written by the pool's run, counted by settle_pool
};

}  // namespace strata
