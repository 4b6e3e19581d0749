// The plugin manifest: which plugin files to load, their options, and which provider wins when two offer
// the same thing. The schema and every error are documented in docs/manifest.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

struct ManifestPlugin {
  std::string file;            // as written in the manifest
  std::filesystem::path path;  // file resolved against the manifest's folder (absolute)
  std::string options_json;    // the "options" object as JSON text, "{}" when absent
  bool enabled = true;
};

struct Manifest {
  std::filesystem::path path;  // where it was read from (absolute); names it in messages
  std::vector<ManifestPlugin> plugins;
  // "prefer": a GGUF type name (or the reserved key "backend") -> provider names, best first.
  std::map<std::string, std::vector<std::string>> prefer;
};

// A manifest is a short list of plugins: a larger file is not one, and is refused rather than read whole.
inline constexpr uint64_t kMaxManifestBytes = uint64_t{1} << 20;

// Reads and validates a manifest file (a regular file of at most kMaxManifestBytes). Throws strata::Error
// starting with the manifest's path.
Manifest load_manifest(const std::filesystem::path& path);

// Validates manifest text as if it had been read from path (relative plugin files resolve against
// path's folder). Throws strata::Error starting with path.
Manifest parse_manifest(std::string_view text, const std::filesystem::path& path);

// The manifest installed beside the strata executable (strata-manifest.json).
std::filesystem::path default_manifest_path();

}  // namespace strata
