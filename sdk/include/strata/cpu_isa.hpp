// Which SIMD level the CPU dot kernels use. Decided once per library at its kernels' first use, from what the
// CPU supports, lowered (never raised past the CPU) by a request: the host's (the strata executable's
// --cpu-isa, which a plugin adopts at init from the host services: sdk::adopt_host_settings in plugin.hpp),
// else the environment's STRATA_CPU_ISA=auto|avx512|avx2|scalar, so that the core and every plugin pick the
// same level. Kernels for a level are ordinary functions marked with STRATA_TARGET_AVX2 / STRATA_TARGET_AVX512:
// the rest of the project stays built for the baseline CPU.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#define STRATA_X86 1
// F16C comes with every AVX2 CPU (Haswell, Zen and later), so it is part of the level, not checked alone.
#define STRATA_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define STRATA_TARGET_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#else
#define STRATA_X86 0
#endif

namespace strata::sdk {

// Ordered: a level includes everything below it.
enum class CpuIsa { scalar = 0, avx2 = 1, avx512 = 2 };

inline constexpr CpuIsa kAllCpuIsas[] = {CpuIsa::scalar, CpuIsa::avx2, CpuIsa::avx512};

inline const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::avx512:
      return "avx512";
    case CpuIsa::avx2:
      return "avx2";
    case CpuIsa::scalar:
      break;
  }
  return "scalar";
}

// The best level this CPU runs. avx512 means AVX-512 F/BW/VL with VNNI (Ice Lake, Zen 4 and later).
inline CpuIsa detect_cpu_isa() {
#if STRATA_X86
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  if (avx2 && avx512) return CpuIsa::avx512;
  if (avx2) return CpuIsa::avx2;
#endif
  return CpuIsa::scalar;
}

// What a request may name: a level, or auto for the best this CPU runs.
inline constexpr const char* kCpuIsaRequestNames = "auto, avx512, avx2, scalar";

// An empty text when name is one of kCpuIsaRequestNames, else the error to report, naming source (a flag,
// option or variable) and the names allowed.
inline std::string cpu_isa_request_problem(std::string_view source, std::string_view name) {
  if (name == "auto") return {};
  for (CpuIsa isa : kAllCpuIsas) {
    if (name == cpu_isa_name(isa)) return {};
  }
  return std::string(source) + " is \"" + std::string(name) + "\", not one of " + kCpuIsaRequestNames;
}

// The level this library's host asked for: the core sets it from the --cpu-isa flag, a plugin's init from the
// host services. Empty when none was asked. Set it before the library's kernels first run (cpu_isa()).
inline std::string& host_cpu_isa_request() {
  static std::string request;
  return request;
}

struct CpuIsaRequest {
  std::string name;    // empty: none (the best level)
  const char* source;  // what asked, for messages
};

// What this library's kernels are asked for: the host's request, else STRATA_CPU_ISA when set, else none.
inline CpuIsaRequest cpu_isa_request() {
  if (!host_cpu_isa_request().empty()) return {host_cpu_isa_request(), "the host's cpu_isa (--cpu-isa)"};
  const char* from_environment = std::getenv("STRATA_CPU_ISA");
  return {from_environment != nullptr ? from_environment : "", "STRATA_CPU_ISA"};
}

struct CpuIsaChoice {
  CpuIsa isa;
  std::string warning;  // empty unless the request could not be honoured as asked
};

// The level to use when `requested` (a request's name, or null or empty for none) is asked for on a CPU whose
// best level is `supported`.
inline CpuIsaChoice choose_cpu_isa(const char* requested, CpuIsa supported) {
  const std::string_view name = requested != nullptr ? requested : "";
  if (name.empty() || name == "auto") return {supported, {}};
  for (CpuIsa isa : kAllCpuIsas) {
    if (name != cpu_isa_name(isa)) continue;
    if (isa <= supported) return {isa, {}};
    return {supported, "CPU instruction set " + std::string(name) + " was asked for but this CPU lacks it; using " +
                           cpu_isa_name(supported)};
  }
  return {supported, cpu_isa_request_problem("the CPU instruction set", name) + "; using " + cpu_isa_name(supported)};
}

// The level for this library, decided on the first call. The warning goes to stderr: the SDK has no logger,
// and a plugin may ask before the host has handed it one.
inline CpuIsa cpu_isa() {
  static const CpuIsa chosen = [] {
    const CpuIsaChoice choice = choose_cpu_isa(cpu_isa_request().name.c_str(), detect_cpu_isa());
    if (!choice.warning.empty()) std::fprintf(stderr, "strata: warning: %s\n", choice.warning.c_str());
    return choice.isa;
  }();
  return chosen;
}

}  // namespace strata::sdk
