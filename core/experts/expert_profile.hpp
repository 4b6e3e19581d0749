// The expert profile file: how often the router chose each (layer, expert) over a calibration run (`strata
// profile`), which `strata plan` and the hybrid executor's expert cache start from. JSON, versioned; the format
// and every check are in docs/experts.md:
//
//   {"format": "strata-expert-profile", "version": 1,
//    "model": {"file": "m.gguf", "architecture": "qwen3moe", "n_layer": 2, "n_expert": 8, "n_expert_used": 2},
//    "prompts": 3, "tokens": 120,
//    "counts": [[c_l0_e0, c_l0_e1, ...], [c_l1_e0, ...]]}
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/experts/routing_counts.hpp"

namespace strata {

class OutputFile;

inline constexpr std::string_view kExpertProfileFormat = "strata-expert-profile";
inline constexpr int64_t kExpertProfileVersion = 1;
// A profile holds one number per (layer, expert): a few hundred KiB for the largest MoE models. A larger file is
// not one, and is refused rather than read whole.
inline constexpr uint64_t kMaxExpertProfileBytes = uint64_t{16} << 20;

// What a profile says about its model and its run besides the counts.
struct ExpertProfileInfo {
  std::string model_file;    // the model's file name, without its folder (informational)
  std::string architecture;  // general.architecture (informational)
  int32_t n_layer = 0;
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int64_t prompts = 0;  // prompts of the calibration run
  int64_t tokens = 0;   // tokens routed: prompt and decoded (each layer's counts sum to tokens x n_expert_used)
};

struct ExpertProfile {
  ExpertProfileInfo info;
  RoutingCounts counts;
};

// The profile as JSON text, one layer's counts a line. Throws strata::Error when counts disagree with info's
// n_layer and n_expert, or hold a negative or non-finite count.
std::string format_expert_profile(const RoutingCounts& counts, const ExpertProfileInfo& info);
// Writes it and finishes out (opened before the work, as every output is).
void write_expert_profile(OutputFile& out, const RoutingCounts& counts, const ExpertProfileInfo& info);
void write_expert_profile(const std::filesystem::path& path, const RoutingCounts& counts,
                          const ExpertProfileInfo& info);

// Reads a profile (a regular file of at most kMaxExpertProfileBytes) for a model of n_layer layers of n_expert
// experts; 0 for either accepts the file's. Every error is one line starting with the path and naming the field:
// not JSON (with line and column), another format, a version this strata does not read, a missing or mistyped
// field, a shape other than the model's, a negative or non-finite count.
ExpertProfile read_expert_profile(const std::filesystem::path& path, int32_t n_layer, int32_t n_expert);
// The same on text read from path (the fuzzer's entry).
ExpertProfile parse_expert_profile(std::string_view text, const std::filesystem::path& path, int32_t n_layer,
                                   int32_t n_expert);

// The share of the counted pairs that the top `fraction` of all (layer, expert) pairs take, ranked as ExpertPlan
// ranks them: 0.25 for uniform counts at fraction 0.25, near 1 for very skewed ones. 0 without counts.
double top_pairs_share(const RoutingCounts& counts, double fraction);

}  // namespace strata
