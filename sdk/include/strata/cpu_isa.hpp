// Which SIMD level the CPU dot kernels use. Detected once per library at first use, from what the CPU
// supports, and lowered (never raised past the CPU) by STRATA_CPU_ISA=auto|avx512|avx2|scalar, so that the
// core and every plugin pick the same level. Kernels for a level are ordinary functions marked with
// STRATA_TARGET_AVX2 / STRATA_TARGET_AVX512: the rest of the project stays built for the baseline CPU.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#define STRATA_X86 1
// F16C comes with every AVX2 CPU (Haswell, Zen and later), so it is part of the level, not checked alone.
#define STRATA_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define STRATA_TARGET_AVX512 \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#else
#define STRATA_X86 0
#endif

namespace strata::sdk {

// Ordered: a level includes everything below it.
enum class CpuIsa { scalar = 0, avx2 = 1, avx512 = 2 };

inline constexpr CpuIsa kAllCpuIsas[] = {CpuIsa::scalar, CpuIsa::avx2, CpuIsa::avx512};

inline const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::avx512: return "avx512";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::scalar: break;
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

struct CpuIsaChoice {
  CpuIsa isa;
  std::string warning;  // empty unless the request could not be honoured as asked
};

// The level to use when `requested` (STRATA_CPU_ISA's value, or null when unset) is asked for on a CPU whose
// best level is `supported`.
inline CpuIsaChoice choose_cpu_isa(const char* requested, CpuIsa supported) {
  const std::string_view name = requested != nullptr ? requested : "";
  if (name.empty() || name == "auto") return {supported, {}};
  for (CpuIsa isa : kAllCpuIsas) {
    if (name != cpu_isa_name(isa)) continue;
    if (isa <= supported) return {isa, {}};
    return {supported, "STRATA_CPU_ISA=" + std::string(name) + " but this CPU lacks it; using " +
                           cpu_isa_name(supported)};
  }
  return {supported, "STRATA_CPU_ISA=" + std::string(name) + " is not one of auto, avx512, avx2, scalar; using " +
                         cpu_isa_name(supported)};
}

// The level for this process, decided on the first call. The warning goes to stderr: the SDK has no logger,
// and a plugin may ask before the host has handed it one.
inline CpuIsa cpu_isa() {
  static const CpuIsa chosen = [] {
    const CpuIsaChoice choice = choose_cpu_isa(std::getenv("STRATA_CPU_ISA"), detect_cpu_isa());
    if (!choice.warning.empty()) std::fprintf(stderr, "strata: warning: %s\n", choice.warning.c_str());
    return choice.isa;
  }();
  return chosen;
}

}  // namespace strata::sdk
