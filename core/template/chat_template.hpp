// The chat front end: renders a model's chat template for a conversation, with the variables Hugging
// Face's apply_chat_template passes (messages, add_generation_prompt, bos_token, eos_token) plus any
// extra ones (tools, enable_thinking, date_string, ...).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/template/template.hpp"

namespace strata::jinja {

struct ChatRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  bool add_generation_prompt = false;
  std::string bos_token;
  std::string eos_token;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more template variables
};

// A request from {"messages", "add_generation_prompt", "bos_token", "eos_token", "extra"}; other keys
// are ignored. Throws strata::Error for a malformed object.
ChatRequest chat_request_from_json(const nlohmann::ordered_json& object);

// The same from JSON text, refused (strata::Error) when it nests deeper than kMaxNesting levels: copying
// and converting JSON recurse, so deeper input would exhaust the stack.
ChatRequest parse_chat_request(std::string_view json_text);

// Throws strata::Error for a template or data that fails to render, and for messages or extra values that
// nest deeper than kMaxNesting levels or hold integers past 64 bits.
std::string render_chat(const Template& chat_template, const ChatRequest& request, const RenderOptions& options = {});
std::string render_chat(std::string_view template_text, const ChatRequest& request, const RenderOptions& options = {});

}  // namespace strata::jinja
