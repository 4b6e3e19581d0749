// Where the tests find the reference data and the built executable.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace strata::test {

// The reference folder: tests/reference in the source tree, unless the environment variable or the CMake cache
// variable STRATA_REFERENCE_DIR names another (the environment wins), e.g. a newer set in ../shared/reference.
std::filesystem::path reference_dir();
// The model names (file stems) under reference_dir()/models; a placeholder when absent, so that the
// parameterized tests still instantiate and then fail, naming the missing folder.
std::vector<std::string> reference_model_names();

// A model or vocabulary name as a GoogleTest parameter name (letters, digits and underscores).
std::string test_name(const std::string& model_name);

std::filesystem::path strata_executable();
std::filesystem::path default_manifest_path();

}  // namespace strata::test

// Fails the test (never skips it) when a reference file or folder is missing: a clone holds its reference data.
#define ASSERT_REFERENCE(path)               \
  ASSERT_TRUE(std::filesystem::exists(path)) \
      << "reference data missing: " << (path) << " (tests/reference; STRATA_REFERENCE_DIR overrides it)"
