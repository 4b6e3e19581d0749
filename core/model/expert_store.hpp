// Where a hybrid placement's experts live in host memory: the bytes the CPU expert pool reads and the copies to
// the GPU (cache fills, PCIe staging, the adaptive tier's swaps) come from. Pinned: a page-locked copy from the
// device backend's host_alloc, which a GPU's copy engine reads directly (a copy from the mapped file goes through
// a staging copy on the host, several times slower). Mapped: the file's mapping itself, touched once at start so
// that steps do not wait for page faults. docs/experts.md, "Host memory".
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/gguf/gguf_file.hpp"
#include "core/model/model_config.hpp"

namespace strata {

enum class ExpertMemory {
  automatic,  // pinned where the device backend gives page-locked memory and the host has room, else mapped
  pinned,
  mapped,
};

// Parses --host-experts: "auto", "pinned" or "mapped"; throws strata::Error naming the flag.
ExpertMemory parse_expert_memory(const std::string& text);

// The choice, and why, for bytes of experts: pinned needs the backend's page-locked memory and the bytes free in
// host memory (available, MemAvailable) with a margin for everything else.
struct ExpertMemoryChoice {
  bool pinned = false;
  std::string reason;
};
// Throws strata::Error, with the numbers, where pinned is asked for and cannot be had.
ExpertMemoryChoice choose_expert_memory(ExpertMemory requested, bool page_locked_offered, const std::string& backend,
                                        uint64_t bytes, uint64_t available);

class ExpertStore {
 public:
  // The routed experts' tensors of every layer (blk.L.ffn_{gate,up,down}_exps.weight).
  ExpertStore(Backend& device, const gguf::Model& file, const ModelConfig& config, ExpertMemory memory);

  // A tensor's bytes: its page-locked copy, or the mapping (tensors that are not experts: always the mapping).
  const void* data(const gguf::TensorInfo& tensor) const;
  // A layer's expert tensor: matrix 0 ffn_gate_exps, 1 ffn_up_exps, 2 ffn_down_exps.
  const gguf::TensorInfo& tensor(int32_t layer, int matrix) const { return *tensors_[layer][matrix]; }
  // One expert's matrix in a layer, where data(tensor) has it.
  const uint8_t* expert_matrix(int32_t layer, int matrix, int32_t expert) const;
  bool pinned() const { return !copies_.empty(); }
  uint64_t bytes() const { return bytes_; }

 private:
  void copy_into_pinned(Backend& device, const std::vector<const gguf::TensorInfo*>& tensors);
  void touch_mapping(const std::vector<const gguf::TensorInfo*>& tensors) const;

  std::vector<std::array<const gguf::TensorInfo*, 3>> tensors_;  // [layer][gate, up, down]
  uint64_t bytes_ = 0;
  std::vector<HostMemory> blocks_;
  std::map<const uint8_t*, const void*> copies_;  // a tensor's mapped bytes -> its page-locked copy
};

}  // namespace strata
