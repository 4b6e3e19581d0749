#include "core/plugin/manifest.hpp"

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <cctype>
#include <initializer_list>
#include <nlohmann/json.hpp>

#include "core/gguf/ggml_types.hpp"
#include "core/util/error.hpp"
#include "core/util/user_file.hpp"

namespace strata {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kDefaultManifestName = "strata-manifest.json";
// Reserved in "prefer" for choosing a backend plugin; accepted now so manifests can name it early.
constexpr std::string_view kBackendPreferenceKey = "backend";

std::string lowercase(std::string_view text) {
  std::string lowered(text);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) { return std::tolower(c); });
  return lowered;
}

// Levenshtein distance, case-insensitive: small enough for keys and type names.
std::size_t edit_distance(std::string_view a_text, std::string_view b_text) {
  const std::string a = lowercase(a_text), b = lowercase(b_text);
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitution});
    }
  }
  return row[b.size()];
}

// " (did you mean "x"?)" for the closest known word within two edits, else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string_view>& known) {
  std::string_view best;
  std::size_t best_distance = 3;
  for (const auto candidate : known) {
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance && distance < word.size()) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best.empty() ? "" : " (did you mean \"" + std::string(best) + "\"?)";
}

std::string join(const std::vector<std::string_view>& words) {
  std::string joined;
  for (const auto word : words) joined += (joined.empty() ? "" : ", ") + std::string(word);
  return joined;
}

// nlohmann reports a byte offset (1-based, of the last character read); editors want line and column.
struct TextPosition {
  std::size_t line = 1;
  std::size_t column = 1;
};

TextPosition position_of(std::string_view text, std::size_t byte) {
  const std::size_t offset = std::min(byte == 0 ? 0 : byte - 1, text.size());
  TextPosition position;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++position.line;
      position.column = 1;
    } else {
      ++position.column;
    }
  }
  return position;
}

// Drops nlohmann's "[json.exception.parse_error.101] parse error at ...: " prefix.
std::string parse_error_detail(const json::exception& error) {
  const std::string what = error.what();
  const auto separator = what.find(": ");
  return separator == std::string::npos ? what : what.substr(separator + 2);
}

// Walks the parsed document; every complaint names the manifest and the JSON path at fault.
class ManifestReader {
 public:
  explicit ManifestReader(fs::path path) : path_(std::move(path)) {}

  Manifest read(const json& root) const {
    expect(root, json::value_t::object, "the top level", "an object");
    reject_unknown_keys(root, "", {"plugins", "prefer"});
    Manifest manifest;
    manifest.path = path_;
    if (const auto plugins = root.find("plugins"); plugins != root.end()) {
      expect(*plugins, json::value_t::array, "plugins", "an array");
      for (std::size_t i = 0; i < plugins->size(); ++i) {
        manifest.plugins.push_back(read_plugin((*plugins)[i], "plugins[" + std::to_string(i) + "]"));
      }
    }
    if (const auto prefer = root.find("prefer"); prefer != root.end()) {
      expect(*prefer, json::value_t::object, "prefer", "an object");
      for (const auto& [key, providers] : prefer->items()) {
        manifest.prefer[key] = read_preference(key, providers, "prefer." + key);
      }
    }
    return manifest;
  }

 private:
  ManifestPlugin read_plugin(const json& entry, const std::string& where) const {
    expect(entry, json::value_t::object, where, "an object");
    reject_unknown_keys(entry, where + ".", {"file", "options", "enabled"});
    const auto file = entry.find("file");
    if (file == entry.end()) fail(where, "missing \"file\" (the plugin's shared library)");
    expect(*file, json::value_t::string, where + ".file", "a string");
    ManifestPlugin plugin;
    plugin.file = file->get<std::string>();
    if (plugin.file.empty()) fail(where + ".file", "is empty");
    plugin.path = (path_.parent_path() / plugin.file).lexically_normal();
    plugin.options_json = "{}";
    if (const auto options = entry.find("options"); options != entry.end()) {
      expect(*options, json::value_t::object, where + ".options", "an object");
      plugin.options_json = options->dump();
    }
    if (const auto enabled = entry.find("enabled"); enabled != entry.end()) {
      expect(*enabled, json::value_t::boolean, where + ".enabled", "true or false");
      plugin.enabled = enabled->get<bool>();
    }
    return plugin;
  }

  std::vector<std::string> read_preference(const std::string& key, const json& providers,
                                           const std::string& where) const {
    if (key != kBackendPreferenceKey && gguf::find_type(key) == nullptr) {
      std::vector<std::string_view> known{kBackendPreferenceKey};
      for (const auto& type : gguf::all_types()) known.push_back(type.name);
      fail(where, "not a GGUF type name nor \"backend\"" + did_you_mean(key, known));
    }
    expect(providers, json::value_t::array, where, "an array of plugin names");
    std::vector<std::string> names;
    for (std::size_t i = 0; i < providers.size(); ++i) {
      const std::string element = where + "[" + std::to_string(i) + "]";
      expect(providers[i], json::value_t::string, element, "a string");
      names.push_back(providers[i].get<std::string>());
    }
    return names;
  }

  void expect(const json& value, json::value_t type, const std::string& where, const std::string& expected) const {
    if (value.type() != type) fail(where, "expected " + expected + ", found " + value.type_name());
  }

  void reject_unknown_keys(const json& object, const std::string& prefix,
                           std::initializer_list<std::string_view> known_keys) const {
    const std::vector<std::string_view> known(known_keys);
    for (const auto& [key, value] : object.items()) {
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      const std::string hint = did_you_mean(key, known);
      fail(prefix + key, "unknown key" + (hint.empty() ? "; known keys: " + join(known) : hint));
    }
  }

  [[noreturn]] void fail(const std::string& where, const std::string& message) const {
    throw Error(path_.string() + ": " + where + ": " + message);
  }

  fs::path path_;
};

}  // namespace

Manifest parse_manifest(std::string_view text, const fs::path& path) {
  const fs::path absolute = fs::absolute(path).lexically_normal();
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& error) {
    const TextPosition position = position_of(text, error.byte);
    throw Error(absolute.string() + ":" + std::to_string(position.line) + ":" + std::to_string(position.column) +
                ": JSON syntax error: " + parse_error_detail(error));
  } catch (const json::exception& error) {  // a well-formed number past the range of doubles
    throw Error(absolute.string() + ": JSON error: " + parse_error_detail(error));
  }
  return ManifestReader(absolute).read(root);
}

Manifest load_manifest(const fs::path& path) {
  return parse_manifest(read_user_file(fs::absolute(path).lexically_normal(), "the manifest", kMaxManifestBytes), path);
}

fs::path default_manifest_path() {
  boost::dll::fs::error_code error;
  const auto executable = boost::dll::program_location(error);
  if (error) throw Error("cannot locate the strata executable to find its default manifest: " + error.message());
  return fs::path(executable.parent_path().string()) / kDefaultManifestName;
}

}  // namespace strata
