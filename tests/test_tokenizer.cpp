// Tokenizers from GGUF vocabularies: the peer engine's expected ids for every reference vocabulary case,
// decoding back to the text, special-token parsing, the streaming detokenizer, errors, and the
// `strata tokenize` / `strata detokenize` commands.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/gguf/gguf_writer.hpp"
#include "core/tokenizer/pre_tokenizer.hpp"
#include "core/tokenizer/pre_tokenizer_rules.hpp"
#include "core/tokenizer/streaming_detokenizer.hpp"
#include "core/tokenizer/tokenizer.hpp"
#include "core/tokenizer/utf8.hpp"
#include "core/util/error.hpp"
#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace strata {
namespace {

namespace fs = std::filesystem;
using tokenizer::StreamingDetokenizer;
using tokenizer::TokenId;
using tokenizer::Tokenizer;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

struct VocabCase {
  std::string text;
  std::vector<TokenId> ids;
};

// The peer's test-tokenizer-0 layout: X.gguf.inp holds the texts separated by lines "__ggml_vocab_test__"
// (a text is everything between two separator lines, without its last newline; the file ends with a
// separator), X.gguf.out one line of ids per text.
std::vector<VocabCase> read_cases(const fs::path& vocab) {
  const std::string separator = "\n__ggml_vocab_test__\n";
  const std::string input = read_file(vocab.string() + ".inp");
  std::vector<VocabCase> cases;
  for (size_t pos = 0, found; (found = input.find(separator, pos)) != std::string::npos;
       pos = found + separator.size()) {
    cases.push_back({input.substr(pos, found - pos), {}});
  }
  std::istringstream output(read_file(vocab.string() + ".out"));
  std::string line;
  for (size_t i = 0; std::getline(output, line); ++i) {
    if (i >= cases.size()) throw std::runtime_error("more id lines than texts in " + vocab.string());
    std::istringstream numbers(line);
    for (TokenId id; numbers >> id;) cases[i].ids.push_back(id);
  }
  return cases;
}

std::vector<std::string> reference_vocab_names() {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(test::reference_dir() / "vocab", error)) {
    if (entry.path().extension() == ".gguf") names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) names.push_back("reference-vocab-missing");
  return names;
}

// The tokenizer of a GGUF file, or null with the reason to skip (file absent, or a BPE vocabulary in a
// build without PCRE2).
std::unique_ptr<Tokenizer> open_tokenizer(const fs::path& path, std::string& skip_reason) {
  try {
    return std::make_unique<Tokenizer>(gguf::Model(path));
  } catch (const Error& error) {
    if (std::string(error.what()).find("no PCRE2") == std::string::npos) throw;
    skip_reason = error.what();
    return nullptr;
  }
}

bool is_well_formed(const std::string& text) { return tokenizer::utf8::replace_invalid(text) == text; }

std::string streamed(const Tokenizer& tokenizer, const std::vector<TokenId>& ids, bool& all_chunks_well_formed) {
  StreamingDetokenizer stream(tokenizer);
  std::string text;
  all_chunks_well_formed = true;
  for (const TokenId id : ids) {
    const std::string chunk = stream.push(id);
    all_chunks_well_formed = all_chunks_well_formed && is_well_formed(chunk);
    text += chunk;
  }
  return text + stream.finish();
}

class ReferenceVocab : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    path_ = test::reference_dir() / "vocab" / GetParam();
    std::string skip_reason;
    tokenizer_ = open_tokenizer(path_, skip_reason);
    if (!tokenizer_) GTEST_SKIP() << skip_reason;
    cases_ = read_cases(path_);
  }
  bool byte_level() const { return tokenizer_->vocabulary().model == "gpt2"; }

  fs::path path_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<VocabCase> cases_;
};

TEST_P(ReferenceVocab, EncodesEveryCaseAsThePeer) {
  ASSERT_FALSE(cases_.empty());
  size_t matching = 0;
  for (size_t i = 0; i < cases_.size(); ++i) {
    const auto ids = tokenizer_->encode(cases_[i].text);
    EXPECT_EQ(ids, cases_[i].ids) << "case " << i << ": '" << cases_[i].text << "'";
    matching += ids == cases_[i].ids;
  }
  std::cout << "[ vocab    ] " << GetParam() << ": " << matching << "/" << cases_.size() << " cases match\n";
}

TEST_P(ReferenceVocab, DecodingTheIdsGivesTheTextBack) {
  for (size_t i = 0; i < cases_.size(); ++i) {
    EXPECT_EQ(tokenizer_->decode(cases_[i].ids), cases_[i].text) << "case " << i;
  }
}

TEST_P(ReferenceVocab, StreamingGivesWholeCharactersThatAddUpToTheDecodedText) {
  for (size_t i = 0; i < cases_.size(); ++i) {
    bool well_formed = false;
    const std::string text = streamed(*tokenizer_, cases_[i].ids, well_formed);
    EXPECT_TRUE(well_formed) << "case " << i << ": a chunk was not well-formed UTF-8";
    EXPECT_EQ(text, tokenizer_->decode(cases_[i].ids)) << "case " << i;
  }
}

TEST_P(ReferenceVocab, StreamingHoldsBackCharactersSplitAcrossTokens) {
  const auto llama = std::find_if(cases_.begin(), cases_.end(), [](const VocabCase& c) {
    return c.text.find("\xF0\x9F\xA6\x99") != std::string::npos;  // 🦙
  });
  ASSERT_NE(llama, cases_.end()) << "no case with the llama emoji";
  // The case must split a character, or it tests nothing.
  const bool splits = std::any_of(llama->ids.begin(), llama->ids.end(),
                                  [&](TokenId id) { return !is_well_formed(tokenizer_->piece(id, 1, true)); });
  ASSERT_TRUE(splits) << "no token of the case ends inside a character";
  bool well_formed = false;
  EXPECT_EQ(streamed(*tokenizer_, llama->ids, well_formed), tokenizer_->decode(llama->ids));
  EXPECT_TRUE(well_formed);
}

INSTANTIATE_TEST_SUITE_P(Vocab, ReferenceVocab, ::testing::ValuesIn(reference_vocab_names()),
                         [](const auto& info) { return test::test_name(info.param); });

fs::path vocab_path(const char* name) { return test::reference_dir() / "vocab" / name; }

TEST(Tokenizer, ControlTokenTextIsSpecialOnlyWhenParsingSpecial) {
  std::string skip_reason;
  const auto gpt2 = open_tokenizer(vocab_path("ggml-vocab-gpt-2.gguf"), skip_reason);
  if (!gpt2) GTEST_SKIP() << skip_reason;
  const std::string text = "Hello<|endoftext|> world";
  const TokenId end_of_text = 50256;
  const auto parsed = gpt2->encode(text, {.parse_special = true});
  EXPECT_EQ(parsed, (std::vector<TokenId>{15496, end_of_text, 995}));
  const auto plain = gpt2->encode(text);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), end_of_text), 0);
  EXPECT_GT(plain.size(), parsed.size());
  EXPECT_EQ(gpt2->decode(plain), text);
  EXPECT_EQ(gpt2->decode(parsed), text);
  EXPECT_EQ(gpt2->decode(parsed, /*render_special=*/false), "Hello world");
}

TEST(Tokenizer, SentencePieceParsesSpecialTokensAndAddsBos) {
  std::string skip_reason;
  const auto spm = open_tokenizer(vocab_path("ggml-vocab-llama-spm.gguf"), skip_reason);
  if (!spm) GTEST_SKIP() << skip_reason;
  const auto hello = spm->encode("Hello");
  // After a special token the text gets its leading space again, as at the start.
  auto expected = std::vector<TokenId>{1, 2};
  expected.insert(expected.begin() + 1, hello.begin(), hello.end());
  EXPECT_EQ(spm->encode("<s>Hello</s>", {.parse_special = true}), expected);
  const auto plain = spm->encode("<s>Hello</s>");
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0);
  EXPECT_EQ(spm->encode("Hello", {.add_special = true}).front(), 1);  // add_bos_token is true, add_eos false
  EXPECT_EQ(spm->encode("Hello", {.add_special = true}).size(), hello.size() + 1);
  EXPECT_EQ(spm->decode(hello), "Hello");  // the space put before the text is dropped again
}

// Every pre-tokenizer compiles, and its pieces put together give the text back (nothing dropped).
TEST(PreTokenizer, EveryKnownTypeSplitsWithoutLosingText) {
  const std::string text =
      "Hello World! I've 12345 apples\n\n  \t…中文 日本語テキスト "
      "한국어 Привет ½ 🦙 $x+=3; a..b   ";
  for (const char* name :
       {"default",   "gpt2",         "gpt-2",          "mpt",         "olmo",       "jais",      "llama-bpe", "llama3",
        "dbrx",      "smaug-bpe",    "chatglm-bpe",    "jais-2",      "qwen2",      "stablelm2", "qwen35",    "laguna",
        "minicpm5",  "deepseek-llm", "deepseek-coder", "deepseek-v3", "spark2_5",   "falcon",    "starcoder", "refact",
        "command-r", "smollm",       "exaone",         "minerva-7b",  "bloom",      "poro-chat", "viking",    "tekken",
        "chameleon", "gpt-4o",       "superbpe",       "bailingmoe",  "seed-coder", "exaone-moe"}) {
    std::unique_ptr<tokenizer::PreTokenizer> pre_tokenizer;
    try {
      pre_tokenizer = std::make_unique<tokenizer::PreTokenizer>(tokenizer::pre_tokenizer_rules(name).patterns);
    } catch (const Error& error) {
      if (std::string(error.what()).find("no PCRE2") != std::string::npos) GTEST_SKIP() << error.what();
      throw;
    }
    std::string joined;
    for (const auto piece : pre_tokenizer->split(text)) {
      EXPECT_FALSE(piece.empty()) << name;
      joined += piece;
    }
    EXPECT_EQ(joined, text) << name;
  }
}

// A vocabulary GGUF written on the fly; keys beyond the tokens come from `extra`.
fs::path write_vocab(const fs::path& path, const std::string& model, const std::vector<std::string>& tokens,
                     const std::vector<int32_t>& types,
                     const std::vector<std::pair<std::string, gguf::Value>>& extra = {}) {
  gguf::Writer writer;
  const auto array = [](gguf::ValueType type, std::vector<gguf::Value> items) {
    return gguf::Value{gguf::Array{type, std::move(items)}};
  };
  std::vector<gguf::Value> texts, type_values;
  for (const auto& token : tokens) texts.push_back(gguf::Value{token});
  for (const auto type : types) type_values.push_back(gguf::Value{type});
  writer.set("general.architecture", gguf::Value{std::string("llama")});
  writer.set("tokenizer.ggml.model", gguf::Value{model});
  writer.set("tokenizer.ggml.tokens", array(gguf::ValueType::STRING, texts));
  writer.set("tokenizer.ggml.token_type", array(gguf::ValueType::I32, type_values));
  for (const auto& [key, value] : extra) writer.set(key, value);
  const auto bytes = writer.to_bytes({});
  write_file(path, std::string(bytes.begin(), bytes.end()));
  return path;
}

// <unk> <s> </s>, the 256 byte tokens, then "▁a".
fs::path write_byte_fallback_vocab(const fs::path& path) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    tokens.push_back(name);
    types.push_back(6);
  }
  tokens.push_back(
      "\xE2\x96\x81"
      "a");
  types.push_back(1);
  return write_vocab(path, "llama", tokens, types);
}

class TokenizerFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = fs::temp_directory_path() /
              ("strata-tokenizer-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::create_directories(folder_);
  }
  void TearDown() override { fs::remove_all(folder_); }
  fs::path folder_;
};

TEST_F(TokenizerFiles, StreamingHoldsAByteFallbackCharacterUntilItIsWhole) {
  const Tokenizer spm{gguf::Model(write_byte_fallback_vocab(folder_ / "bytes.gguf"))};
  const auto ids = spm.encode(
      "a\xF0\x9F\xA6\x99"
      "b");  // a🦙b: "▁a", four byte tokens, "b" as a byte
  const TokenId byte_base = 3;
  ASSERT_EQ(ids, (std::vector<TokenId>{259, byte_base + 0xF0, byte_base + 0x9F, byte_base + 0xA6, byte_base + 0x99,
                                       byte_base + 'b'}));
  StreamingDetokenizer stream(spm);
  std::vector<std::string> chunks;
  for (const TokenId id : ids) chunks.push_back(stream.push(id));
  EXPECT_EQ(chunks, (std::vector<std::string>{"a", "", "", "", "\xF0\x9F\xA6\x99", "b"}));
  EXPECT_EQ(stream.finish(), "");
}

TEST_F(TokenizerFiles, StreamingReplacesWhatCanNeverBeACharacter) {
  const Tokenizer spm{gguf::Model(write_byte_fallback_vocab(folder_ / "bytes.gguf"))};
  const TokenId byte_base = 3;
  StreamingDetokenizer stream(spm);
  EXPECT_EQ(stream.push(byte_base + 0xFF), "\xEF\xBF\xBD");  // never part of UTF-8
  EXPECT_EQ(stream.push(byte_base + 0xE2), "");              // a three-byte character begins ...
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");                // ... and never ends
}

TEST_F(TokenizerFiles, UnknownPreTokenizerIsAnErrorNamingIt) {
  const auto path =
      write_vocab(folder_ / "pre.gguf", "gpt2", {"a", "b", "ab"}, {1, 1, 1},
                  {{"tokenizer.ggml.pre", gguf::Value{std::string("no-such-pre")}},
                   {"tokenizer.ggml.merges",
                    gguf::Value{gguf::Array{gguf::ValueType::STRING, {gguf::Value{std::string("a b")}}}}}});
  try {
    Tokenizer tokenizer{gguf::Model(path)};
    FAIL() << "an unknown pre-tokenizer was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("'no-such-pre'"), std::string::npos) << error.what();
  }
}

TEST_F(TokenizerFiles, UnsupportedTokenizerModelIsAnError) {
  const auto path = write_vocab(folder_ / "bert.gguf", "bert", {"[PAD]", "a"}, {3, 1});
  EXPECT_THROW(Tokenizer{gguf::Model(path)}, Error);
}

TEST_F(TokenizerFiles, IdsOutsideTheVocabularyAreAnError) {
  const Tokenizer spm{gguf::Model(write_byte_fallback_vocab(folder_ / "bytes.gguf"))};
  const std::vector<TokenId> ids = {260};
  EXPECT_THROW(spm.decode(ids), Error);
}

// --- strata tokenize / detokenize ---

test::CommandResult strata(const std::string& arguments) {
  return test::run_command(test::shell_quote(test::strata_executable().string()) + " " + arguments);
}

TEST_F(TokenizerFiles, CliTokenizePrintsThePeerIds) {
  const auto vocab = vocab_path("ggml-vocab-gpt-2.gguf");
  ASSERT_REFERENCE(vocab);
  const auto cases = read_cases(vocab);
  const auto& with_newlines = *std::find_if(cases.begin(), cases.end(), [](const VocabCase& c) {
    return c.text.find('\n') != std::string::npos && c.ids.size() > 1;
  });
  write_file(folder_ / "text.txt", with_newlines.text);
  const auto result = strata("tokenize --model " + test::shell_quote(vocab.string()) + " --text-file " +
                             test::shell_quote((folder_ / "text.txt").string()));
  if (result.exit_code == 1 && result.err.find("no PCRE2") != std::string::npos) GTEST_SKIP() << result.err;
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::string expected;
  for (const TokenId id : with_newlines.ids) expected += (expected.empty() ? "" : " ") + std::to_string(id);
  EXPECT_EQ(result.out, expected + "\n");
}

TEST_F(TokenizerFiles, CliTokenizeAddsAndParsesSpecialTokensOnRequest) {
  const auto vocab = vocab_path("ggml-vocab-llama-spm.gguf");
  ASSERT_REFERENCE(vocab);
  write_file(folder_ / "text.txt", "Hello</s>");
  const std::string command = "tokenize --model " + test::shell_quote(vocab.string()) + " --text-file " +
                              test::shell_quote((folder_ / "text.txt").string());
  const auto plain = strata(command);
  const auto special = strata(command + " --add-special --parse-special");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(special.exit_code, 0) << special.err;
  EXPECT_EQ(plain.out.rfind("15043 ", 0), 0u) << plain.out;  // "▁Hello"
  EXPECT_EQ(special.out, "1 15043 2\n");
}

TEST_F(TokenizerFiles, CliDetokenizePrintsTheTextExactly) {
  const auto vocab = vocab_path("ggml-vocab-gpt-2.gguf");
  ASSERT_REFERENCE(vocab);
  const auto result = strata("detokenize --model " + test::shell_quote(vocab.string()) + " --ids '15496, 995 198'");
  if (result.exit_code == 1 && result.err.find("no PCRE2") != std::string::npos) GTEST_SKIP() << result.err;
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "Hello world\n");
}

TEST_F(TokenizerFiles, CliReportsBadInputInOneLine) {
  const auto vocab = write_byte_fallback_vocab(folder_ / "bytes.gguf");
  const auto bad_id = strata("detokenize --model " + test::shell_quote(vocab.string()) + " --ids '1 x2'");
  EXPECT_EQ(bad_id.exit_code, 1);
  EXPECT_NE(bad_id.err.find("'x2'"), std::string::npos) << bad_id.err;
  const auto out_of_range = strata("detokenize --model " + test::shell_quote(vocab.string()) + " --ids 999");
  EXPECT_EQ(out_of_range.exit_code, 1);
  EXPECT_NE(out_of_range.err.find("999"), std::string::npos) << out_of_range.err;

  const auto pre = write_vocab(folder_ / "pre.gguf", "gpt2", {"a"}, {1},
                               {{"tokenizer.ggml.pre", gguf::Value{std::string("no-such-pre")}},
                                {"tokenizer.ggml.merges", gguf::Value{gguf::Array{gguf::ValueType::STRING, {}}}}});
  write_file(folder_ / "text.txt", "a");
  const auto unknown_pre = strata("tokenize --model " + test::shell_quote(pre.string()) + " --text-file " +
                                  test::shell_quote((folder_ / "text.txt").string()));
  EXPECT_EQ(unknown_pre.exit_code, 1);
  EXPECT_NE(unknown_pre.err.find("no-such-pre"), std::string::npos) << unknown_pre.err;
}

}  // namespace
}  // namespace strata
