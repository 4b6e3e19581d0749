#include "core/engine/chat_format.hpp"

#include "core/template/chat_template.hpp"
#include "core/util/error.hpp"

namespace strata {

std::string format_chat(const gguf::Model& model, const tokenizer::Tokenizer& tokenizer,
                        const nlohmann::ordered_json& messages, bool add_generation_prompt,
                        const nlohmann::ordered_json& tools) {
  const gguf::Value* template_value = model.find("tokenizer.chat_template");
  if (template_value == nullptr || template_value->as_string() == nullptr) {
    throw Error(model.first().path().string() + ": the model has no chat template (tokenizer.chat_template)");
  }
  const auto& vocabulary = tokenizer.vocabulary();
  jinja::ChatRequest request;
  request.messages = messages;
  request.add_generation_prompt = add_generation_prompt;
  if (!tools.is_null()) request.extra["tools"] = tools;
  if (vocabulary.bos) request.bos_token = vocabulary.token(*vocabulary.bos).text;
  if (vocabulary.eos) request.eos_token = vocabulary.token(*vocabulary.eos).text;
  try {
    return jinja::render_chat(*template_value->as_string(), request);
  } catch (const Error& e) {  // the template is the model file's: name it
    throw Error(model.first().path().string() + ": tokenizer.chat_template: " + e.what());
  }
}

std::set<int32_t> end_of_generation_tokens(const tokenizer::Vocabulary& vocabulary) {
  std::set<int32_t> ends;
  for (const auto& id : {vocabulary.eos, vocabulary.eot}) {
    if (id) ends.insert(*id);
  }
  for (const char* text : {"<|im_end|>", "<|eot_id|>", "<|end|>", "<|endoftext|>", "<end_of_turn>"}) {
    if (const auto id = vocabulary.find(text)) ends.insert(*id);
  }
  return ends;
}

}  // namespace strata
