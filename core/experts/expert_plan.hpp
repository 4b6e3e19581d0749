// Which experts live in the GPU's expert cache: the plan ranks every (layer, expert) by how often the router
// chooses it and gives the cache's slots to the best, wherever their layers are (unlike llama.cpp's
// --n-cpu-moe, which keeps whole layers on the CPU). No counts (no profile): every expert is as likely, and
// the slots spread evenly over the layers.
#pragma once

#include <cstdint>
#include <vector>

#include "core/experts/routing_counts.hpp"

namespace strata {

class ExpertPlan {
 public:
  // Slots for at most n_slots experts in all (clamped to n_layer x n_expert), filled with the experts that counts
  // rank highest (counts empty: uniform); ties go to the layer with fewer slots, then the lower expert index.
  static ExpertPlan rank(int32_t n_layer, int32_t n_expert, int64_t n_slots, const RoutingCounts& counts);

  int32_t n_layer() const { return static_cast<int32_t>(slot_of_.size()); }
  int32_t n_expert() const { return n_expert_; }
  int64_t total_slots() const;
  // The slots of a layer: how many experts of it the cache holds.
  int32_t slots(int32_t layer) const { return static_cast<int32_t>(expert_in_slot_[layer].size()); }
  // The expert in a layer's slot (-1: the slot is being refilled), and an expert's slot (-1: not resident).
  int32_t expert_in(int32_t layer, int32_t slot) const { return expert_in_slot_[layer][slot]; }
  int32_t slot_of(int32_t layer, int32_t expert) const { return slot_of_[layer][expert]; }
  bool resident(int32_t layer, int32_t expert) const { return slot_of(layer, expert) >= 0; }
  // Whether every expert of the layer is resident in slot order (slot e holds expert e): the layer's experts
  // then run as if the whole tensor were loaded.
  bool whole_layer(int32_t layer) const;

  // Moves a slot to another expert (-1 empties it): the adaptive tier's swap.
  void assign(int32_t layer, int32_t slot, int32_t expert);

  // The share of the counted (token, expert) pairs that the resident experts would have served.
  double hit_rate(const RoutingCounts& counts) const;

 private:
  void assign_new_slot(int32_t layer, int32_t expert);

  int32_t n_expert_ = 0;
  std::vector<std::vector<int32_t>> expert_in_slot_;  // [layer][slot]
  std::vector<std::vector<int32_t>> slot_of_;         // [layer][expert]
};

}  // namespace strata
