#include "core/tokenizer/vocabulary.hpp"

#include "core/tokenizer/pre_tokenizer_rules.hpp"
#include "core/tokenizer/token_attribute_fixups.hpp"
#include "core/util/error.hpp"

namespace strata::tokenizer {
namespace {

const gguf::Array* find_array(const gguf::Model& model, const std::string& key) {
  const auto* value = model.find(key);
  if (!value) return nullptr;
  const auto* array = value->as_array();
  if (!array) throw Error(key + ": expected an array, found " + value_type_name(value->type()));
  return array;
}

std::string string_or(const gguf::Model& model, const std::string& key, const std::string& fallback) {
  const auto* value = model.find(key);
  if (!value) return fallback;
  const auto* text = value->as_string();
  if (!text) throw Error(key + ": expected a string");
  return *text;
}

bool bool_or(const gguf::Model& model, const std::string& key, bool fallback) {
  const auto* value = model.find(key);
  if (!value) return fallback;
  if (const auto* flag = std::get_if<bool>(&value->data)) return *flag;
  throw Error(key + ": expected a bool");
}

// A special token id from the file, or the fallback; ids outside the vocabulary are ignored, as the peer does.
std::optional<TokenId> token_id_or(const gguf::Model& model, const std::string& key, std::optional<TokenId> fallback,
                                   size_t n_tokens) {
  std::optional<TokenId> id = fallback;
  if (const auto* value = model.find(key)) {
    const auto number = value->as_uint();
    if (!number) throw Error(key + ": expected a token id");
    if (*number < n_tokens) id = static_cast<TokenId>(*number);
  }
  if (id && static_cast<size_t>(*id) >= n_tokens) return std::nullopt;
  return id;
}

uint32_t attributes_of_type(int64_t token_type) {
  switch (token_type) {
    case 1:
      return attribute::normal;
    case 2:
      return attribute::unknown;
    case 3:
      return attribute::control;
    case 4:
      return attribute::user_defined;
    case 5:
      return attribute::unused;
    case 6:
      return attribute::byte;
    default:
      return 0;  // undefined: neither encoded from text nor decoded
  }
}

void read_tokens(const gguf::Model& model, Vocabulary& vocabulary) {
  const auto* texts = find_array(model, "tokenizer.ggml.tokens");
  if (!texts) throw Error("no tokenizer.ggml.tokens: the model has no vocabulary");
  const auto* scores = find_array(model, "tokenizer.ggml.scores");
  const auto* types = find_array(model, "tokenizer.ggml.token_type");
  const size_t n = texts->items.size();
  if (scores && scores->items.size() < n) throw Error("tokenizer.ggml.scores: fewer entries than tokens");
  if (types && types->items.size() < n) throw Error("tokenizer.ggml.token_type: fewer entries than tokens");

  vocabulary.tokens.resize(n);
  vocabulary.ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    auto& token = vocabulary.tokens[i];
    const auto* text = texts->items[i].as_string();
    if (!text) throw Error("tokenizer.ggml.tokens: entry " + std::to_string(i) + " is not a string");
    // An empty text would match everywhere as a special token; the peer renames it the same way.
    token.text = text->empty() ? "[EMPTY_" + std::to_string(i) + "]" : *text;
    if (scores) token.score = static_cast<float>(scores->items[i].as_float().value_or(0.0));
    if (types) token.attributes = attributes_of_type(types->items[i].as_int().value_or(0));
    vocabulary.ids.emplace(token.text, static_cast<TokenId>(i));  // a duplicate text keeps its first id
  }
}

void read_merges(const gguf::Model& model, Vocabulary& vocabulary) {
  const auto* merges = find_array(model, "tokenizer.ggml.merges");
  if (!merges) throw Error("byte-level BPE vocabulary without tokenizer.ggml.merges");
  vocabulary.merges.reserve(merges->items.size());
  for (const auto& item : merges->items) {
    const auto* merge = item.as_string();
    if (!merge) throw Error("tokenizer.ggml.merges: an entry is not a string");
    vocabulary.merges.push_back(*merge);
  }
}

}  // namespace

Vocabulary Vocabulary::from_gguf(const gguf::Model& model) {
  Vocabulary vocabulary;
  vocabulary.model = string_or(model, "tokenizer.ggml.model", "");
  vocabulary.pre_tokenizer = string_or(model, "tokenizer.ggml.pre", "default");
  read_tokens(model, vocabulary);
  const size_t n = vocabulary.tokens.size();

  // Defaults by tokenizer model, as in the peer; the file's keys override them below.
  std::optional<TokenId> default_bos, default_eos, default_unknown;
  if (vocabulary.model == "llama") {
    default_bos = 1;
    default_eos = 2;
    default_unknown = 0;
    vocabulary.add_bos = true;
    vocabulary.add_space_prefix = true;
  } else if (vocabulary.model == "gpt2") {
    vocabulary.add_bos = pre_tokenizer_rules(vocabulary.pre_tokenizer).add_bos;
    read_merges(model, vocabulary);
  } else {
    throw Error("unsupported tokenizer model '" + vocabulary.model +
                "' (tokenizer.ggml.model): supported are 'gpt2' (byte-level BPE) and 'llama' (SentencePiece)");
  }

  vocabulary.bos = token_id_or(model, "tokenizer.ggml.bos_token_id", default_bos, n);
  vocabulary.eos = token_id_or(model, "tokenizer.ggml.eos_token_id", default_eos, n);
  vocabulary.eot = token_id_or(model, "tokenizer.ggml.eot_token_id", std::nullopt, n);
  vocabulary.unknown = token_id_or(model, "tokenizer.ggml.unknown_token_id", default_unknown, n);
  vocabulary.padding = token_id_or(model, "tokenizer.ggml.padding_token_id", std::nullopt, n);
  vocabulary.add_bos = bool_or(model, "tokenizer.ggml.add_bos_token", vocabulary.add_bos);
  vocabulary.add_eos = bool_or(model, "tokenizer.ggml.add_eos_token", vocabulary.add_eos);
  vocabulary.add_space_prefix = bool_or(model, "tokenizer.ggml.add_space_prefix", vocabulary.add_space_prefix);

  apply_token_attribute_fixups(vocabulary, string_or(model, "general.name", ""));
  return vocabulary;
}

std::optional<TokenId> Vocabulary::find(const std::string& text) const {
  const auto found = ids.find(text);
  if (found == ids.end()) return std::nullopt;
  return found->second;
}

const Token& Vocabulary::token(TokenId id) const {
  if (!has(id)) {
    throw Error("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                std::to_string(tokens.size() - 1) + ")");
  }
  return tokens[static_cast<size_t>(id)];
}

}  // namespace strata::tokenizer
