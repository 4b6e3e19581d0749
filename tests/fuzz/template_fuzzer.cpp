// libFuzzer target for the Jinja engine: any template text must compile and render, or end in
// strata::Error, never crash, hang or grow without bound (run with -rss_limit_mb and -timeout). Chat
// templates come inside model files, so they are input like any other.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/template/chat_template.hpp"
#include "core/util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
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
  try {
    strata::jinja::RenderOptions options;
    options.now = std::tm{};
    strata::jinja::render_chat(std::string_view(reinterpret_cast<const char*>(data), size), request, options);
  } catch (const strata::Error&) {
  }
  return 0;
}
