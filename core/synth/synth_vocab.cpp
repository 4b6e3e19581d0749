#include "core/synth/synth_vocab.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "core/util/error.hpp"

namespace strata::synth {
namespace {

// The text the merges are learned from: plain English with some code and punctuation, so the merged
// tokens look like a real tokenizer's (" the", "ing", "expert").
constexpr std::string_view kSampleText =
    "The quick brown fox jumps over the lazy dog. A mixture of experts model routes each token to a few "
    "experts, and the router learns which experts fit which tokens. The experts that are used most often "
    "stay in the fast memory, while the others wait in the host memory until they are needed. When the "
    "model reads a long prompt, it keeps the keys and the values of every token in its cache, so that the "
    "next token only needs to look back at them. Hello world! def main(): return 0. In the morning the "
    "weather was cold and clear, and the people walked to the station to take the train into the city. "
    "They talked about the news, the weather, and the things they wanted to do in the evening. Numbers "
    "like 1, 2, 3, 10, 42 and 2024 appear in text too, as do questions: what is the time? where is the "
    "station? The engine quantizes the weights of the experts to three bits, which keeps the model small "
    "enough to run on a single machine with a modest graphics card.";

constexpr const char* kEndOfText = "<|endoftext|>";
constexpr const char* kImStart = "<|im_start|>";
constexpr const char* kImEnd = "<|im_end|>";
constexpr uint32_t kSpecialCount = 3;

void append_utf8(std::string& out, uint32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else {  // the mapping stays below U+0800
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

enum class CharClass { letter, digit, space, other };
CharClass classify(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return CharClass::letter;
  if (c >= '0' && c <= '9') return CharClass::digit;
  return c == ' ' ? CharClass::space : CharClass::other;
}

// A simplified GPT-2 pre-tokenization: an optional leading space joined to a run of letters, of digits or
// of punctuation. Merges never cross these words, as in the real tokenizer.
std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = i;
    if (text[i] == ' ' && i + 1 < text.size() && text[i + 1] != ' ') ++i;
    const CharClass run = classify(text[i]);
    while (i < text.size() && classify(text[i]) == run) ++i;
    words.emplace_back(text.substr(start, i - start));
  }
  return words;
}

// One word as a sequence of symbols, with how often it occurs in the sample.
struct WordCount {
  std::vector<std::string> symbols;
  int count;
};

std::vector<WordCount> count_words(std::string_view text) {
  std::map<std::string, int> counts;
  for (const auto& word : split_words(text)) ++counts[word];
  std::vector<WordCount> words;
  for (const auto& [word, count] : counts) {
    WordCount entry{{}, count};
    for (const char c : word) entry.symbols.push_back(byte_token(static_cast<uint8_t>(c)));
    words.push_back(std::move(entry));
  }
  return words;
}

// The most frequent adjacent pair (ties broken by the pair's text, so the result is deterministic).
std::pair<std::pair<std::string, std::string>, int> best_pair(const std::vector<WordCount>& words) {
  std::map<std::pair<std::string, std::string>, int> pairs;
  for (const auto& word : words) {
    for (size_t i = 0; i + 1 < word.symbols.size(); ++i) pairs[{word.symbols[i], word.symbols[i + 1]}] += word.count;
  }
  std::pair<std::pair<std::string, std::string>, int> best{{}, 0};
  for (const auto& [pair, count] : pairs) {
    if (count > best.second) best = {pair, count};
  }
  return best;
}

void apply_merge(std::vector<WordCount>& words, const std::pair<std::string, std::string>& pair) {
  for (auto& word : words) {
    std::vector<std::string> merged;
    for (size_t i = 0; i < word.symbols.size(); ++i) {
      if (i + 1 < word.symbols.size() && word.symbols[i] == pair.first && word.symbols[i + 1] == pair.second) {
        merged.push_back(pair.first + pair.second);
        ++i;
      } else {
        merged.push_back(word.symbols[i]);
      }
    }
    word.symbols = std::move(merged);
  }
}

}  // namespace

std::string byte_token(uint8_t b) {
  // Printable bytes stand for themselves; the others are moved, in order, to U+0100 and up.
  const auto printable = [](uint32_t v) { return (v >= 33 && v <= 126) || (v >= 161 && v <= 172) || v >= 174; };
  uint32_t code_point = b;
  if (!printable(b)) {
    uint32_t shifted = 0;
    for (uint32_t v = 0; v < b; ++v) shifted += printable(v) ? 0 : 1;
    code_point = 256 + shifted;
  }
  std::string text;
  append_utf8(text, code_point);
  return text;
}

SynthVocab build_vocab(uint32_t n_vocab) {
  if (n_vocab < 256 + kSpecialCount) {
    throw Error("vocabulary of " + std::to_string(n_vocab) +
                " tokens is too small (at least 259: 256 bytes and 3 special tokens)");
  }
  SynthVocab vocab;
  for (uint32_t b = 0; b < 256; ++b) {
    vocab.tokens.push_back(byte_token(static_cast<uint8_t>(b)));
    vocab.types.push_back(TokenType::normal);
  }
  std::set<std::string> known(vocab.tokens.begin(), vocab.tokens.end());
  auto words = count_words(kSampleText);
  const size_t merged_budget = n_vocab - 256 - kSpecialCount;
  // Merges stop at pairs seen once: those would only memorize the sample.
  while (vocab.tokens.size() - 256 < merged_budget) {
    const auto [pair, count] = best_pair(words);
    if (count < 2) break;
    apply_merge(words, pair);
    vocab.merges.push_back(pair.first + " " + pair.second);
    // Two merges can spell one token ("a bc", "ab c"); the vocabulary lists it once.
    if (known.insert(pair.first + pair.second).second) {
      vocab.tokens.push_back(pair.first + pair.second);
      vocab.types.push_back(TokenType::normal);
    }
  }
  const auto add_special = [&](const char* text) {
    vocab.tokens.emplace_back(text);
    vocab.types.push_back(TokenType::control);
    return static_cast<int32_t>(vocab.tokens.size() - 1);
  };
  vocab.endoftext_id = add_special(kEndOfText);
  vocab.im_start_id = add_special(kImStart);
  vocab.im_end_id = add_special(kImEnd);
  // Real Qwen files pad their embedding rows past the tokenizer's size the same way (convert_hf_to_gguf).
  while (vocab.tokens.size() < n_vocab) {
    vocab.tokens.push_back("[PAD" + std::to_string(vocab.tokens.size()) + "]");
    vocab.types.push_back(TokenType::unused);
  }
  return vocab;
}

const std::string& chatml_template() {
  static const std::string text =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
      "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
      "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  return text;
}

}  // namespace strata::synth
