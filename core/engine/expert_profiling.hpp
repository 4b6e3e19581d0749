// A calibration run for an expert profile (`strata profile`): prompts read and decoded greedily, every layer's
// routing counted through the session's routing observer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/experts/routing_counts.hpp"
#include "core/model/session.hpp"

namespace strata {

// A prompts file: one prompt a line (lines empty or only of white space are skipped; a line's end, "\n" or "\r\n",
// is not part of its prompt), or with jsonl one JSON string a line (a prompt may then hold line breaks, written
// "\n"). Throws strata::Error naming the file and line of a line that is not a JSON string (jsonl), and the
// file when it holds no prompt.
struct Prompt {
  std::string text;
  int64_t line = 0;  // where it is in the file, from 1
};
std::vector<Prompt> parse_prompts(std::string_view text, const std::filesystem::path& path, bool jsonl);

struct ProfilingResult {
  RoutingCounts counts;
  int64_t prompts = 0;
  int64_t prompt_tokens = 0;
  int64_t decoded_tokens = 0;  // tokens decoded and read back in (each one routed)
};

// For each prompt: the session rewound to 0, the prompt read, then up to `decode` tokens decoded greedily (the
// argmax), each read back in so that its routing counts too; a decode stops early at an end token or where the
// context is full. session.on_routing must be empty (the run sets its own). A prompt longer than the context
// throws strata::Error naming it (prompt_names[i], e.g. "line 3 of p.txt"). Counts every layer's chosen experts.
ProfilingResult profile_routing(const Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                const std::vector<std::string>& prompt_names, int32_t decode,
                                const std::set<int32_t>& end_tokens, SessionOptions session);

}  // namespace strata
