#include "core/tokenizer/tokenizer.hpp"

#include <cstdlib>

#include "core/tokenizer/bpe_encoder.hpp"
#include "core/tokenizer/spm_encoder.hpp"
#include "core/util/error.hpp"

namespace strata::tokenizer {
namespace {

std::unique_ptr<const TextEncoder> make_encoder(const Vocabulary& vocabulary) {
  if (vocabulary.model == "gpt2") return std::make_unique<BpeEncoder>(vocabulary);
  if (vocabulary.model == "llama") return std::make_unique<SpmEncoder>(vocabulary);
  throw Error("unsupported tokenizer model '" + vocabulary.model + "'");
}

TokenId required(const std::optional<TokenId>& id, const char* what) {
  if (!id) throw Error(std::string("the vocabulary asks for a ") + what + " token but has no " + what + " id");
  return *id;
}

// "<0x0A>" -> byte 0x0A.
std::string byte_token_bytes(const std::string& text) {
  if (text.size() != 6 || text.compare(0, 3, "<0x") != 0 || text.back() != '>') return {};
  return std::string(1, static_cast<char>(std::strtol(text.substr(3, 2).c_str(), nullptr, 16)));
}

}  // namespace

Tokenizer::Tokenizer(const gguf::Model& model) : Tokenizer(Vocabulary::from_gguf(model)) {}

Tokenizer::Tokenizer(Vocabulary vocabulary)
    : vocabulary_(std::make_unique<const Vocabulary>(std::move(vocabulary))),
      encoder_(make_encoder(*vocabulary_)),
      special_tokens_(*vocabulary_) {}

std::vector<TokenId> Tokenizer::encode(std::string_view text, EncodeOptions options) const {
  const auto& vocabulary = *vocabulary_;
  std::vector<TokenId> ids;
  if (options.add_special && vocabulary.add_bos) ids.push_back(required(vocabulary.bos, "BOS"));
  bool after_special = true;
  for (const auto& fragment : special_tokens_.split(text, options.parse_special)) {
    if (fragment.special) {
      ids.push_back(*fragment.special);
    } else {
      encoder_->encode(fragment.text, after_special, ids);
    }
    after_special = fragment.special.has_value();
  }
  if (options.add_special && vocabulary.add_eos) ids.push_back(required(vocabulary.eos, "EOS"));
  return ids;
}

std::string Tokenizer::piece(TokenId id, size_t index, bool render_special) const {
  const auto& token = vocabulary_->token(id);
  std::string bytes;
  if (token.attributes & (attribute::control | attribute::unknown)) {
    if (render_special) bytes = token.text;
  } else if (token.attributes & attribute::user_defined) {
    bytes = token.text;
  } else if (token.attributes & attribute::normal) {
    bytes = encoder_->normal_token_bytes(token.text);
  } else if (token.attributes & attribute::byte) {
    bytes = byte_token_bytes(token.text);
  }
  if (index == 0 && vocabulary_->add_space_prefix && !bytes.empty() && bytes.front() == ' ') bytes.erase(0, 1);
  return bytes;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool render_special) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) text += piece(ids[i], i, render_special);
  return text;
}

}  // namespace strata::tokenizer
