#include "core/tokenizer/pre_tokenizer.hpp"

#include <algorithm>

#include "core/tokenizer/utf8.hpp"
#include "core/util/error.hpp"

#ifdef STRATA_HAVE_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

namespace strata::tokenizer {

#ifdef STRATA_HAVE_PCRE2

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int error_code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(error_code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

struct MatchData {
  explicit MatchData(const pcre2_code* code) : data(pcre2_match_data_create_from_pattern(code, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(data); }
  pcre2_match_data* data;
};

// One match at or after start; the JIT's small stack can overflow on long runs, the interpreter then takes over.
int match(const pcre2_code* code, std::string_view piece, size_t start, uint32_t options, pcre2_match_data* data) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  int rc = pcre2_match(code, subject, piece.size(), start, options | PCRE2_NO_UTF_CHECK, data, nullptr);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    rc = pcre2_match(code, subject, piece.size(), start, options | PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, data, nullptr);
  }
  return rc;
}

// Appends piece cut into matches and the gaps between them. After an empty match the next attempt must
// be non-empty at the same place, else the search moves one character on (as std::regex_iterator does).
void split_piece(const pcre2_code* code, std::string_view piece, pcre2_match_data* data,
                 std::vector<std::string_view>& out) {
  size_t pos = 0, emitted = 0;
  uint32_t options = 0;
  while (pos <= piece.size()) {
    const int rc = match(code, piece, pos, options, data);
    if (rc == PCRE2_ERROR_NOMATCH) {
      if (options == 0 || pos == piece.size()) break;
      options = 0;
      pos += utf8::length_from_lead_byte(piece[pos]);
      continue;
    }
    if (rc < 0) throw Error("pre-tokenizer regex failed: " + pcre2_message(rc));
    const PCRE2_SIZE* range = pcre2_get_ovector_pointer(data);
    const size_t begin = range[0], end = range[1];
    if (begin > emitted) out.push_back(piece.substr(emitted, begin - emitted));
    if (end > begin) out.push_back(piece.substr(begin, end - begin));
    emitted = std::max(emitted, end);
    options = end == begin ? PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED : 0;
    pos = end;
  }
  if (emitted < piece.size()) out.push_back(piece.substr(emitted));
}

}  // namespace

PreTokenizer::PreTokenizer(const std::vector<std::string>& patterns) {
  for (const auto& pattern : patterns) {
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    auto compiled = std::make_unique<Compiled>();
    // $ means the end of the piece only, as in the peer's ECMAScript regexes.
    compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error_code, &error_offset, nullptr);
    if (!compiled->code) {
      throw Error("pre-tokenizer regex /" + pattern + "/ at offset " + std::to_string(error_offset) + ": " +
                  pcre2_message(error_code));
    }
    pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);  // without JIT support the interpreter runs
    patterns_.push_back(std::move(compiled));
  }
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (!text.empty()) pieces.push_back(text);
  for (const auto& pattern : patterns_) {
    MatchData data(pattern->code);
    std::vector<std::string_view> next;
    next.reserve(pieces.size() * 2);
    for (const auto piece : pieces) split_piece(pattern->code, piece, data.data, next);
    pieces = std::move(next);
  }
  return pieces;
}

#else

struct PreTokenizer::Compiled {};

PreTokenizer::PreTokenizer(const std::vector<std::string>&) {
  throw Error("this build has no PCRE2, which byte-level BPE tokenizers need (install libpcre2-dev and rebuild)");
}

std::vector<std::string_view> PreTokenizer::split(std::string_view) const { return {}; }

#endif

PreTokenizer::~PreTokenizer() = default;

}  // namespace strata::tokenizer
