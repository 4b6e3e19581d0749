// Tool calls in a reply, as Qwen's chat templates teach the model to write them (the Hermes format): each
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
// block is one call. The server answers them as OpenAI's tool_calls, and the text outside the blocks as content.
#pragma once

#include <string>
#include <vector>

namespace strata::server {

inline constexpr const char* kToolCallOpen = "<tool_call>";
inline constexpr const char* kToolCallClose = "</tool_call>";

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object, as text (OpenAI's function.arguments)
};

struct ReplyWithCalls {
  std::string content;  // the text outside the call blocks, trimmed of the whitespace around them
  std::vector<ToolCall> calls;
};

// Splits a reply into its calls and the rest. A block whose body is not a JSON object with a string "name" (and an
// object or string "arguments", or none) is no call: it stays in the content as the model wrote it, as does an
// opening tag never closed.
ReplyWithCalls parse_tool_calls(const std::string& reply);

}  // namespace strata::server
