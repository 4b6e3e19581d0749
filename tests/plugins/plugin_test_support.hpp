// For the tests that load plugins: where the test plugins are built, and a scratch folder for the
// manifests (and broken files) a test writes.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

namespace strata::testing {

// name is the plugin target without "strata-": "quant-q4_0" or "test-abi-major-newer".
inline std::filesystem::path test_plugin_path(const std::string& name) {
  return std::filesystem::path(STRATA_TEST_PLUGIN_DIR) / ("libstrata-" + name + ".so");
}

// A fresh folder under the system's temp folder, removed with everything in it at the end.
class ScratchFolder {
 public:
  ScratchFolder()
      : path_(std::filesystem::temp_directory_path() /
              ("strata-test-" + std::to_string(::getpid()) + "-" + std::to_string(next_id_++))) {
    std::filesystem::create_directories(path_);
  }
  ~ScratchFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;

  const std::filesystem::path& path() const { return path_; }

  std::filesystem::path write(const std::string& name, const std::string& text) const {
    const auto file = path_ / name;
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }

 private:
  static inline std::atomic<int> next_id_{0};
  std::filesystem::path path_;
};

}  // namespace strata::testing
