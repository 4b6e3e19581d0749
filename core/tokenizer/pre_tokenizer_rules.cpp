#include "core/tokenizer/pre_tokenizer_rules.hpp"

#include <initializer_list>
#include <map>

#include "core/util/error.hpp"

namespace strata::tokenizer {
namespace {

// English contractions, case-insensitive, as the peer spells (?i:'s|'t|'re|'ve|'m|'ll|'d).
#define STRATA_CONTRACTIONS R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))re"

const std::string gpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
const std::string llama3 = STRATA_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string qwen2 = STRATA_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string qwen35 = STRATA_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string jais2 = STRATA_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+)re"
    R"re(|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S))re"
    R"re(|\s{1,2}(?!\S)|\s{1})re";
const std::string minicpm5 = STRATA_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string seed_coder = STRATA_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string exaone_moe = STRATA_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re";
const std::string bailingmoe =
    R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re";
// Upper/lower-case letter runs, written with lookaheads as the peer does (a letter that is not a-z, ...).
const std::string tekken =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*)re"
    R"re(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string gpt4o =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+)re" STRATA_CONTRACTIONS
    R"re(?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*)re" STRATA_CONTRACTIONS
    R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string ascii_punctuation_word =  // DeepSeek V3: one ASCII punctuation mark glued to a Latin word
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)re";
const std::string cjk_kana = R"re([一-龥぀-ゟ゠-ヿ]+)re";
const std::string cjk_hangul = R"re([一-龥ࠀ-一가-퟿]+)re";
const std::string bloom = R"re( ?[^(\s|.,!?…。，、।۔،)]+)re";

struct NamedRules {
  std::initializer_list<const char*> names;
  PreTokenizerRules rules;
};

const std::map<std::string, PreTokenizerRules>& rules_by_name() {
  static const auto table = [] {
    const std::vector<NamedRules> entries = {
        {{"default"}, {{R"re([\p{P}\$\+<=>\^~\|]+)re", gpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"}}},
        {{"gpt2", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
          "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "exaone4", "mpt", "olmo", "jais", "trillion",
          "granite-docling"},
         {{gpt2}}},
        {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
         {{llama3}, true, true}},
        {{"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {{llama3}}},
        {{"jais-2"}, {{jais2}}},
        {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2"},
         {{qwen2}}},
        {{"qwen35"}, {{qwen35}}},
        {{"laguna"}, {{R"re([^\n]+|[\n]+)re", qwen2}}},
        {{"minicpm5"}, {{R"re(\p{N}{1,3})re", minicpm5}, true}},
        {{"deepseek-llm"},
         {{R"re([\r\n])re",
           R"re(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)re",
           R"re(\s?[!-/:-~！-／：-～‘-‟　-。]+)re", R"re(\s+$)re", cjk_hangul, R"re(\p{N}+)re"}}},
        {{"deepseek-coder"}, {{R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", cjk_hangul, R"re(\p{N})re"}}},
        {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
         {{R"re(\p{N}{1,3})re", cjk_kana,
           ascii_punctuation_word + R"re(| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}}},
        {{"spark2_5"},
         {{R"re(\p{N}{1,3})re", cjk_kana, ascii_punctuation_word + R"re(| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)re",
           R"re(\p{N})re"}}},
        {{"falcon"}, {{R"re([\p{P}\$\+<=>\^~\|`]+)re", gpt2, "[0-9][0-9][0-9]"}}},
        {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"},
         {{R"re(\p{N})re", gpt2}}},
        {{"bloom", "poro-chat", "gpt3-finnish"}, {{bloom}}},
        {{"viking"}, {{bloom, R"re(\p{N})re"}}},
        {{"tekken"}, {{tekken}, true, true}},
        {{"chameleon"},
         {{"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", R"re(([\t\n]|    |  ))re", R"re(\p{N})re",
           R"re([\p{P}!-/:-@\[-`{-~])re", gpt2},
          false,
          true}},
        {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {{gpt4o}}},
        {{"superbpe"}, {{R"re(\p{N}+)re", R"re((?=(\d{3})+(?!\d)))re"}}},
        {{"bailingmoe", "bailingmoe2", "llada-moe"}, {{bailingmoe}}},
        {{"seed-coder"}, {{seed_coder}}},
        {{"exaone-moe"}, {{exaone_moe}}},
    };
    std::map<std::string, PreTokenizerRules> by_name;
    for (const auto& entry : entries) {
      for (const char* name : entry.names) by_name.emplace(name, entry.rules);
    }
    return by_name;
  }();
  return table;
}

}  // namespace

const PreTokenizerRules& pre_tokenizer_rules(const std::string& name) {
  const auto& table = rules_by_name();
  const auto found = table.find(name);
  if (found == table.end()) throw Error("unknown pre-tokenizer type '" + name + "' (tokenizer.ggml.pre)");
  return found->second;
}

}  // namespace strata::tokenizer
