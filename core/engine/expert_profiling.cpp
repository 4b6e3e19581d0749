#include "core/engine/expert_profiling.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/util/error.hpp"

namespace strata {

std::vector<Prompt> parse_prompts(std::string_view text, const std::filesystem::path& path, bool jsonl) {
  std::vector<Prompt> prompts;
  size_t start = 0;
  for (int64_t line = 1; start < text.size(); ++line) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view content = text.substr(start, end - start);
    start = end + 1;
    if (!content.empty() && content.back() == '\r') content.remove_suffix(1);
    if (content.find_first_not_of(" \t\r\v\f") == std::string_view::npos) continue;
    if (!jsonl) {
      prompts.push_back({std::string(content), line});
      continue;
    }
    nlohmann::json value;
    try {
      value = nlohmann::json::parse(content);
    } catch (const nlohmann::json::exception&) {
      throw Error(
          path.string() + ":" + std::to_string(line) +
          ": not a JSON string (with --jsonl each line is one prompt as a JSON string, e.g. \"Hello\\nworld\")");
    }
    if (!value.is_string()) {
      throw Error(path.string() + ":" + std::to_string(line) + ": expected a JSON string, found " + value.type_name() +
                  " (with --jsonl each line is one prompt as a JSON string)");
    }
    prompts.push_back({value.get<std::string>(), line});
  }
  if (prompts.empty()) throw Error(path.string() + ": holds no prompt (one prompt a line; empty lines are skipped)");
  return prompts;
}

ProfilingResult profile_routing(const Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                const std::vector<std::string>& prompt_names, int32_t decode,
                                const std::set<int32_t>& end_tokens, SessionOptions session_options) {
  if (decode < 0) throw Error("--decode is " + std::to_string(decode) + "; it must be >= 0");
  if (session_options.on_routing) throw Error("profile_routing sets the session's routing observer itself");
  const ModelConfig& config = model.config();
  ProfilingResult result;
  result.counts = RoutingCounts(config.n_layer, config.n_expert);
  session_options.on_routing = [&](int32_t layer, std::span<const int32_t> ids) { result.counts.add(layer, ids); };
  Session session(model, session_options);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& prompt = prompts[i];
    const std::string name = i < prompt_names.size() ? prompt_names[i] : "prompt " + std::to_string(i + 1);
    if (prompt.empty()) throw Error(name + ": the prompt has no tokens");
    if (prompt.size() > static_cast<size_t>(session.context_size())) {
      throw Error(name + ": the prompt's " + std::to_string(prompt.size()) + " tokens do not fit the context of " +
                  std::to_string(session.context_size()) + " (--ctx)");
    }
    session.rewind(0);
    std::span<const float> logits = session.forward_last(prompt);
    result.prompt_tokens += static_cast<int64_t>(prompt.size());
    for (int32_t step = 0; step < decode && session.position() < session.context_size(); ++step) {
      const auto token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      if (end_tokens.contains(token)) break;
      logits = session.forward_last(std::span(&token, 1));
      ++result.decoded_tokens;
    }
    ++result.prompts;
  }
  return result;
}

}  // namespace strata
