#include "support/reference.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace strata::test {

std::filesystem::path reference_dir() {
  const char* override_dir = std::getenv("STRATA_REFERENCE_DIR");
  return override_dir != nullptr && *override_dir != '\0' ? override_dir : STRATA_REFERENCE_DIR;
}

std::vector<std::string> reference_model_names() {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(reference_dir() / "models", error)) {
    if (entry.path().extension() == ".gguf") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) names.push_back("reference-data-missing");
  return names;
}

std::string test_name(const std::string& model_name) {
  std::string name = model_name;
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

std::filesystem::path strata_executable() { return std::filesystem::path(STRATA_BIN_DIR) / "strata"; }

std::filesystem::path default_manifest_path() { return std::filesystem::path(STRATA_BIN_DIR) / "strata-manifest.json"; }

}  // namespace strata::test
