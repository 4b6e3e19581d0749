// Where the tests find the reference data and the built executable.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace strata::test {

// The reference folder (../shared/reference by default; the STRATA_REFERENCE_DIR cache variable moves it).
std::filesystem::path reference_dir();
// The model names (file stems) under reference_dir()/models; a placeholder when absent, so that the
// parameterized tests still instantiate and then skip with a message.
std::vector<std::string> reference_model_names();

// A model or vocabulary name as a GoogleTest parameter name (letters, digits and underscores).
std::string test_name(const std::string& model_name);

std::filesystem::path strata_executable();
std::filesystem::path default_manifest_path();

}  // namespace strata::test
