// libFuzzer target for the tokenizers: any bytes, with or without special-token parsing, must encode and
// decode under every reference vocabulary (byte-level BPE with each pre-tokenizer, SentencePiece) without
// crashing or hanging. The vocabularies are GGUF files in STRATA_FUZZ_VOCAB_DIR (the reference data);
// the first input byte picks one and the options.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include "core/gguf/gguf_file.hpp"
#include "core/tokenizer/tokenizer.hpp"
#include "core/util/error.hpp"

namespace {

const std::vector<std::unique_ptr<strata::tokenizer::Tokenizer>>& tokenizers() {
  static const auto loaded = [] {
    std::vector<std::unique_ptr<strata::tokenizer::Tokenizer>> all;
    for (const auto& entry : std::filesystem::directory_iterator(STRATA_FUZZ_VOCAB_DIR)) {
      if (entry.path().extension() != ".gguf") continue;
      all.push_back(std::make_unique<strata::tokenizer::Tokenizer>(strata::gguf::Model(entry.path())));
    }
    if (all.empty()) {
      std::fprintf(stderr, "no vocabulary in %s\n", STRATA_FUZZ_VOCAB_DIR);
      std::abort();
    }
    return all;
  }();
  return loaded;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& all = tokenizers();
  const auto& tokenizer = *all[data[0] % all.size()];
  const strata::tokenizer::EncodeOptions options{(data[0] & 0x40) != 0, (data[0] & 0x80) != 0};
  try {
    const auto ids = tokenizer.encode(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), options);
    volatile size_t sink = tokenizer.decode(ids).size();
    (void)sink;
  } catch (const strata::Error&) {
  }
  return 0;
}
