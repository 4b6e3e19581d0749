// The SDK's buffer access for backends (strata/backend_checks.hpp): size checks, and the write notice a
// buffer with derived copies (backend-cuda's 8-bit rows) relies on to retire them.
#include <gtest/gtest.h>

#include <vector>

#include "strata/backend_checks.hpp"

namespace {

struct CountingBuffer {
  std::vector<float> values;
  size_t bytes = 0;
  int writes = 0;
  void* base() const { return const_cast<float*>(values.data()); }
  void note_write() { ++writes; }
};

TEST(BackendChecks, WritableAccessNotesAWriteAndReadOnlyAccessDoesNot) {
  CountingBuffer buffer{std::vector<float>(16), 16 * sizeof(float)};
  const CountingBuffer* read_only = &buffer;
  EXPECT_EQ(strata::sdk::floats(read_only, 16, "x"), buffer.values.data());
  EXPECT_EQ(buffer.writes, 0);
  EXPECT_EQ(strata::sdk::floats(&buffer, 16, "out"), buffer.values.data());
  EXPECT_EQ(buffer.writes, 1);
}

TEST(BackendChecks, AccessBeyondTheBufferIsRefusedNamingIt) {
  CountingBuffer buffer{std::vector<float>(4), 4 * sizeof(float)};
  try {
    strata::sdk::floats(static_cast<const CountingBuffer*>(&buffer), 5, "matmul x");
    FAIL() << "5 values fit a buffer of 4";
  } catch (const strata::sdk::Failure& failure) {
    EXPECT_NE(std::string(failure.what()).find("matmul x"), std::string::npos) << failure.what();
  }
}

}  // namespace
