#include "core/tokenizer/pre_tokenizer_rules.hpp"

#include <map>
#include <vector>

#include "core/util/error.hpp"

namespace strata::tokenizer {
namespace {

// English contractions, case-insensitive, as the peer spells (?i:'s|'t|'re|'ve|'m|'ll|'d).
#define STRATA_CONTRACTIONS R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))re"

const std::string gpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
const std::string llama3 = STRATA_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string qwen2 =
    STRATA_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string qwen35 = STRATA_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string jais2 = STRATA_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+)re"
    R"re(|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S))re"
    R"re(|\s{1,2}(?!\S)|\s{1})re";
const std::string minicpm5 =
    STRATA_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string seed_coder =
    STRATA_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string exaone_moe = STRATA_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re";
const std::string bailingmoe =
    R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re";
// Upper/lower-case letter runs, written with lookaheads as the peer does (a letter that is not a-z, ...).
const std::string tekken =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*)re"
    R"re(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string gpt4o = R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+)re" STRATA_CONTRACTIONS
                          R"re(?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*)re" STRATA_CONTRACTIONS
                          R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string ascii_punctuation_word =  // DeepSeek V3: one ASCII punctuation mark glued to a Latin word
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)re";
const std::string cjk_kana = R"re([一-龥぀-ゟ゠-ヿ]+)re";
const std::string cjk_hangul = R"re([一-龥ࠀ-一가-퟿]+)re";
const std::string bloom = R"re( ?[^(\s|.,!?…。，、।۔،)]+)re";

struct NamedRules {
  // A vector, not an initializer_list: a list's backing array would end with the full expression that
  // builds the table, before the names are read (AddressSanitizer caught it under the tokenizer fuzzer).
  std::vector<const char*> names;
  PreTokenizerRules rules;
};

const std::map<std::string, PreTokenizerRules>& rules_by_name() {
  static const auto table = [] {
    const std::vector<NamedRules> entries = {
        {{"default"}, {{R"re([\p{P}\$\+<=>\^~\|]+)re", gpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"}}},
        {{"gpt2",       "gpt-2",   "phi-2",  "jina-es",     "jina-de",    "gigachat",       "jina-v2-es",
          "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "jina-v1-en", "jina-v2-code",   "roberta-bpe",
          "exaone4",    "mpt",     "olmo",   "jais",        "trillion",   "granite-docling"},
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
           // Cased letters (Unicode LC), written as code points.
           R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re",
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
