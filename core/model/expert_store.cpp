#include "core/model/expert_store.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "core/util/error.hpp"
#include "core/util/log.hpp"
#include "core/util/parallel.hpp"
#include "strata/host_memory.hpp"

namespace strata {
namespace {

// Left to everything else when the experts are page-locked: the page cache, the process, the pool's buffers.
constexpr uint64_t kHostMargin = uint64_t{2} << 30;
// Copied or touched a piece at a time by every thread, with a progress line every few seconds.
constexpr uint64_t kPieceBytes = uint64_t{16} << 20;
constexpr auto kProgressInterval = std::chrono::seconds(3);
constexpr size_t kPageBytes = 4096;

std::string gib(uint64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (uint64_t{1} << 30)); }

// Runs work(piece) for every kPieceBytes piece of bytes over the host's threads (fewer where the system gives
// fewer), the calling thread logging what is done every few seconds as "<what>: X of Y GiB (N s)".
void for_each_piece(uint64_t bytes, const std::string& what, const std::function<void(uint64_t, uint64_t)>& work) {
  const uint64_t pieces = (bytes + kPieceBytes - 1) / kPieceBytes;
  std::atomic<uint64_t> done{0};
  const auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  const auto piece_work = [&](uint64_t piece, unsigned worker) {
    const uint64_t begin = piece * kPieceBytes, end = std::min(bytes, begin + kPieceBytes);
    work(begin, end);
    done += end - begin;
    const auto now = std::chrono::steady_clock::now();
    if (worker == 0 && done < bytes && now - last_report > kProgressInterval) {
      last_report = now;
      log().info("{}: {} of {} ({:.0f} s)", what, gib(done), gib(bytes),
                 std::chrono::duration<double>(now - start).count());
    }
  };
  parallel_for(pieces, std::clamp(std::thread::hardware_concurrency(), 1u, 16u), piece_work, ThreadShortage::run_fewer);
}

}  // namespace

ExpertMemory parse_expert_memory(const std::string& text) {
  if (text == "auto") return ExpertMemory::automatic;
  if (text == "pinned") return ExpertMemory::pinned;
  if (text == "mapped") return ExpertMemory::mapped;
  throw Error("--host-experts takes auto, pinned or mapped, not '" + text + "'");
}

ExpertMemoryChoice choose_expert_memory(ExpertMemory requested, bool page_locked_offered, const std::string& backend,
                                        uint64_t bytes, uint64_t available) {
  if (requested == ExpertMemory::mapped) return {false, "--host-experts mapped"};
  const bool fits = available > kHostMargin && bytes <= available - kHostMargin;
  const std::string room = fmt::format("{} of experts, {} of host memory available ({} kept for the rest)", gib(bytes),
                                       gib(available), gib(kHostMargin));
  if (requested == ExpertMemory::pinned) {
    if (!page_locked_offered) {
      throw Error("--host-experts pinned: " + backend + " gives no page-locked host memory (host_alloc)");
    }
    if (!fits) throw Error("--host-experts pinned: the experts do not fit: " + room);
    return {true, room};
  }
  if (!page_locked_offered) return {false, backend + " gives no page-locked host memory"};
  if (!fits) return {false, "too little host memory to page-lock them: " + room};
  return {true, room};
}

ExpertStore::ExpertStore(Backend& device, const gguf::Model& file, const ModelConfig& config, ExpertMemory memory) {
  std::vector<const gguf::TensorInfo*> tensors;
  for (int32_t layer = 0; layer < config.n_layer; ++layer) {
    const std::string prefix = "blk." + std::to_string(layer) + ".";
    tensors_.push_back({&file.tensor(prefix + "ffn_gate_exps.weight"), &file.tensor(prefix + "ffn_up_exps.weight"),
                        &file.tensor(prefix + "ffn_down_exps.weight")});
    tensors.insert(tensors.end(), tensors_.back().begin(), tensors_.back().end());
  }
  for (const auto* tensor : tensors) bytes_ += tensor->bytes;
  const ExpertMemoryChoice choice =
      choose_expert_memory(memory, device.has_host_memory(), device.name(), bytes_, sdk::available_host_memory());
  if (choice.pinned) {
    try {
      copy_into_pinned(device, tensors);
      log().info("expert store: {} page-locked ({})", gib(bytes_), choice.reason);
      return;
    } catch (const Error& error) {
      blocks_.clear();
      copies_.clear();
      if (memory == ExpertMemory::pinned) {
        throw Error(fmt::format("--host-experts pinned: {} of page-locked memory for the experts failed ({})",
                                gib(bytes_), error.what()));
      }
      log().warn("expert store: page-locking the experts failed ({}); reading the mapped file instead", error.what());
    }
  } else {
    log().info("expert store: the mapped file ({})", choice.reason);
  }
  touch_mapping(tensors);
}

// One block a tensor (a layer's matrix of every expert: tens to hundreds of MiB), filled by the host's threads.
void ExpertStore::copy_into_pinned(Backend& device, const std::vector<const gguf::TensorInfo*>& tensors) {
  std::vector<std::pair<const uint8_t*, uint8_t*>> spans;  // where each tensor starts in the file and the copy
  std::vector<uint64_t> starts;                            // its first byte in the whole
  uint64_t offset = 0;
  for (const auto* tensor : tensors) {
    blocks_.push_back(device.host_alloc(tensor->bytes));
    spans.emplace_back(tensor->data, static_cast<uint8_t*>(blocks_.back().get()));
    starts.push_back(offset);
    offset += tensor->bytes;
  }
  for_each_piece(bytes_, "expert store: page-locking", [&](uint64_t begin, uint64_t end) {
    // A piece may cross tensors: copy each part into its own block.
    auto index = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), begin) - starts.begin() - 1);
    while (begin < end) {
      const uint64_t tensor_end = starts[index] + tensors[index]->bytes;
      const uint64_t part_end = std::min(end, tensor_end), within = begin - starts[index];
      std::memcpy(spans[index].second + within, spans[index].first + within, part_end - begin);
      begin = part_end;
      ++index;
    }
  });
  for (size_t i = 0; i < tensors.size(); ++i) copies_[spans[i].first] = spans[i].second;
}

// A read of every page, so that the pool's first steps do not stop on page faults (a model read from disk for the
// first time is read here, at disk speed).
void ExpertStore::touch_mapping(const std::vector<const gguf::TensorInfo*>& tensors) const {
  std::vector<uint64_t> starts;
  uint64_t offset = 0;
  for (const auto* tensor : tensors) {
    starts.push_back(offset);
    offset += tensor->bytes;
  }
  std::atomic<uint64_t> checksum{0};  // keeps the reads from being optimized away
  for_each_piece(bytes_, "expert store: reading the mapped experts", [&](uint64_t begin, uint64_t end) {
    auto index = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), begin) - starts.begin() - 1);
    uint64_t sum = 0;
    while (begin < end) {
      const uint64_t part_end = std::min(end, starts[index] + tensors[index]->bytes);
      const uint8_t* data = tensors[index]->data;
      for (uint64_t at = begin - starts[index]; at < part_end - starts[index]; at += kPageBytes) sum += data[at];
      begin = part_end;
      ++index;
    }
    checksum += sum;
  });
}

const uint8_t* ExpertStore::expert_matrix(int32_t layer, int matrix, int32_t expert) const {
  const gguf::TensorInfo& info = tensor(layer, matrix);
  return static_cast<const uint8_t*>(data(info)) + static_cast<uint64_t>(expert) * (info.bytes / info.shape[2]);
}

const void* ExpertStore::data(const gguf::TensorInfo& tensor) const {
  const auto copy = copies_.find(tensor.data);
  return copy != copies_.end() ? copy->second : tensor.data;
}

}  // namespace strata
