// The plugin ABI's helpers: STRATA_HAS_FIELD reads a struct as the minor its struct_size says, and a backend's
// named optional functions (get_proc_address, ABI 1.7) are found by name, and never asked of an older table.
// The layouts themselves are pinned at compile time (core/plugin/abi_layout.c, checked by tests/abi/).
#include <gtest/gtest.h>

#include <string>

#include "core/backend/backend.hpp"
#include "core/quant/quant_registry.hpp"
#include "cpu_backend.hpp"
#include "strata/backend.h"

namespace {

TEST(PluginAbi, HasFieldFollowsStructSize) {
  strata_quant_type type{};
  type.struct_size = STRATA_FIELD_END(strata_quant_type, cpu_dot_rows_multi);  // a type built for ABI 1.0
  EXPECT_TRUE(STRATA_HAS_FIELD(&type, dequantize));
  EXPECT_TRUE(STRATA_HAS_FIELD(&type, cpu_dot_rows_multi));
  EXPECT_FALSE(STRATA_HAS_FIELD(&type, cuda_expert_matvec));
  EXPECT_FALSE(STRATA_HAS_FIELD(&type, cuda_repack));
  type.struct_size = STRATA_FIELD_END(strata_quant_type, cuda_expert_matvec) - 1;  // the field's last byte missing
  EXPECT_FALSE(STRATA_HAS_FIELD(&type, cuda_expert_matvec));
  type.struct_size = sizeof type;
  EXPECT_TRUE(STRATA_HAS_FIELD(&type, cuda_repack));
}

// What the test's get_proc_address saw: the instance it was asked for, and how often.
struct ProcLookups {
  int calls = 0;
  strata_backend* instance = nullptr;
};
ProcLookups lookups;

constexpr const char* kKnownName = "strata_test_answer";
int32_t answer() { return 42; }

strata_proc test_get_proc_address(strata_backend* backend, const char* name) {
  ++lookups.calls;
  lookups.instance = backend;
  return std::string(name) == kKnownName ? reinterpret_cast<strata_proc>(&answer) : nullptr;
}

// The CPU backend's table with the test's get_proc_address, cut to struct_size bytes.
strata_backend_table cpu_table_with_lookup(uint32_t struct_size) {
  strata_backend_table table = strata::cpu::cpu_backend_table();
  table.get_proc_address = &test_get_proc_address;
  table.struct_size = struct_size;
  return table;
}

TEST(BackendProcAddress, FindsAKnownNameAndAnswersNullForAnUnknownOne) {
  lookups = {};
  const strata::QuantRegistry quants;
  const strata_backend_table table = cpu_table_with_lookup(sizeof(strata_backend_table));
  const strata::Backend backend("backend-cpu with names", table, quants, 1, "{}");
  // The core asks for its six names (the expert cache's four, buffer_reads, signalled_write) once, when the instance
  // is made.
  EXPECT_EQ(lookups.calls, 6);
  EXPECT_FALSE(backend.has_expert_cache());
  const strata_proc known = backend.proc_address(kKnownName);
  ASSERT_NE(known, nullptr);
  EXPECT_EQ(reinterpret_cast<int32_t (*)()>(known)(), answer());
  EXPECT_EQ(lookups.instance, backend.get());
  EXPECT_EQ(backend.proc_address("strata_test_no_such_function"), nullptr);
  EXPECT_EQ(lookups.calls, 8);
}

// A backend built for ABI 1.6 has no get_proc_address: whatever lies past its struct_size is never called.
TEST(BackendProcAddress, AnAbi16TableIsNeverAsked) {
  lookups = {};
  const strata::QuantRegistry quants;
  const strata_backend_table table =
      cpu_table_with_lookup(STRATA_FIELD_END(strata_backend_table, route_experts_normed));
  const strata::Backend backend("backend-cpu 1.6", table, quants, 1, "{}");
  EXPECT_EQ(backend.proc_address(kKnownName), nullptr);
  EXPECT_EQ(lookups.calls, 0);
}

TEST(BackendProcAddress, ABackendWithoutNamedFunctionsAnswersNull) {
  const strata::QuantRegistry quants;
  const strata::Backend backend("backend-cpu", strata::cpu::cpu_backend_table(), quants, 1, "{}");
  EXPECT_EQ(backend.proc_address(kKnownName), nullptr);
}

}  // namespace
