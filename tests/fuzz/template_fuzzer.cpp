// libFuzzer target for the Jinja engine, from both sides: the input is template text, optionally followed by
// a NUL byte and a chat request as JSON (what `strata template --input` reads; without one a fixed
// conversation is used). Chat templates come inside model files and requests from clients, so both are
// input like any other: they must render or end in strata::Error, never crash, hang or grow without bound
// (run with -rss_limit_mb and -timeout). The render's budgets are smaller than its defaults, so that every
// input stays quick under the sanitizers; it is the limits that are exercised, not their size.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/template/chat_template.hpp"
#include "core/util/error.hpp"

namespace {

const strata::jinja::ChatRequest& default_request() {
  static const strata::jinja::ChatRequest request = [] {
    strata::jinja::ChatRequest r;
    r.messages = nlohmann::ordered_json::parse(R"([
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi <b>there</b>"},
      {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]},
      {"role": "tool", "content": "42"}
    ])");
    r.add_generation_prompt = true;
    r.bos_token = "<s>";
    r.eos_token = "</s>";
    r.extra = {{"tools", nlohmann::ordered_json::array({{{"name", "f"}, {"parameters", {{"type", "object"}}}}})}};
    return r;
  }();
  return request;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  try {
    using strata::jinja::parse_chat_request;
    const auto request =
        split == std::string_view::npos ? default_request() : parse_chat_request(input.substr(split + 1));
    strata::jinja::RenderOptions options;
    options.now = std::tm{};
    options.max_evaluations = 100'000;
    options.max_work = int64_t{64} << 20;
    strata::jinja::render_chat(input.substr(0, split), request, options);
  } catch (const strata::Error&) {
  }
  return 0;
}
