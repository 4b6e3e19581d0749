#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and fuzzes each input parser for a bounded share
# of the time: the GGUF reader 4/10, the Jinja chat-template engine 3/10, the tokenizers 3/20 (under the
# reference vocabularies in tests/reference/vocab), the plugin manifest, the expert profile and the server's
# request bodies 1/20 each, the server's config file 1/40.
# Usage: scripts/fuzz.sh [seconds=60]. Crashes are written to fuzz-out/ and make the script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_BUILD_FUZZERS=ON -DSTRATA_BUILD_TESTS=OFF -DSTRATA_CUDA=OFF >/dev/null
ninja -C build-fuzz gguf_fuzzer manifest_fuzzer template_fuzzer tokenizer_fuzzer expert_profile_fuzzer \
  openai_request_fuzzer serve_config_fuzzer

# Undefined behaviour stops a run like a crash does.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

# fuzz TARGET SECONDS MAX_LEN: a working corpus seeded from the committed one, which stays untouched.
fuzz() {
  mkdir -p "fuzz-out/$1-corpus"
  local seconds_for_target=$(($2 > 0 ? $2 : 1))  # 0 would mean no limit to libFuzzer
  "build-fuzz/bin/$1_fuzzer" -max_total_time="$seconds_for_target" -rss_limit_mb=2048 -timeout=5 -max_len="$3" \
    -artifact_prefix="fuzz-out/$1-" "fuzz-out/$1-corpus" "tests/fuzz/$1-corpus"
}
fuzz gguf $((seconds * 4 / 10)) 65536
fuzz template $((seconds * 3 / 10)) 8192  # the reference chat templates run to 5 KB
fuzz tokenizer $((seconds * 3 / 20)) 4096
fuzz manifest $((seconds * 1 / 20)) 4096
fuzz expert_profile $((seconds * 1 / 20)) 4096
fuzz openai_request $((seconds * 1 / 20)) 4096
fuzz serve_config $((seconds * 1 / 40)) 4096
