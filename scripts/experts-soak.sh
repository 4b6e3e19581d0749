#!/usr/bin/env bash
# The hybrid placement's soak run (docs/experts.md, Testing): one `strata bench` process reads prompts of 100,
# 1000 and 8000 tokens and decodes 256, test after test, for about SOAK_SECONDS (default 300), while its resident
# host memory and (on a GPU) the GPU memory in use are sampled every SAMPLE_SECONDS (default 5). It fails when
# either grows by more than 5% and 256 MiB from the first sample after the first test line to the last, or when
# no test line comes for STALL_SECONDS (default 180): a stall.
#   scripts/experts-soak.sh MODEL [STRATA FLAGS...]
#   scripts/experts-soak.sh build-device/qwen3-30b-a3b-iq3_s.gguf --backend cuda -t 16 --expert-cache 1536
# STRATA (default build/bin/strata), PROMPTS (default "100 1000 8000"), DECODE (default 256), OUT (a folder for
# soak.csv and soak.log).
set -euo pipefail
model=${1:?usage: $0 MODEL [STRATA FLAGS...]}
shift
strata=${STRATA:-build/bin/strata}
out=${OUT:-.}
mkdir -p "$out"
csv=$out/soak.csv log=$out/soak.log
duration=${SOAK_SECONDS:-300} interval=${SAMPLE_SECONDS:-5} stall=${STALL_SECONDS:-180}

# The repetitions that fill the duration, from a first timed pass of each test (at least 1).
read -r -a prompts <<<"${PROMPTS:-100 1000 8000}"
start=$(date +%s%N)
"$strata" bench --model "$model" -p "${prompts[@]}" -n "${DECODE:-256}" -r 1 --log-level warn "$@" >"$log" 2>&1
pass_ms=$((($(date +%s%N) - start) / 1000000))
reps=$((duration * 1000 / (pass_ms > 0 ? pass_ms : 1)))
[ "$reps" -ge 1 ] || reps=1
echo "one pass took ${pass_ms} ms: ${reps} repetitions of each test" | tee -a "$log"

"$strata" bench --model "$model" -p "${prompts[@]}" -n "${DECODE:-256}" -r "$reps" --log-level warn "$@" >>"$log" 2>&1 &
pid=$!
echo "seconds,rss_mib,gpu_mib,lines" >"$csv"
begin=$(date +%s) last_line=$(date +%s) lines=$(wc -l <"$log") status=0
lines_before=$lines
while kill -0 "$pid" 2>/dev/null; do
  sleep "$interval"
  rss=$(awk '/^VmRSS:/ {print int($2 / 1024)}' "/proc/$pid/status" 2>/dev/null || true)
  [ -n "$rss" ] || break  # the process ended during the sleep
  gpu=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
    awk -F', ' -v p="$pid" '$1 == p {print $2}' || true)
  now_lines=$(wc -l <"$log")
  [ "$now_lines" -gt "$lines" ] && last_line=$(date +%s) && lines=$now_lines
  echo "$(($(date +%s) - begin)),$rss,${gpu:-0},$lines" >>"$csv"
  if [ $(($(date +%s) - last_line)) -gt "$stall" ]; then
    echo "STALL: no test line for ${stall} s" | tee -a "$log"
    kill "$pid"
    status=1
    break
  fi
done
wait "$pid" || status=1
cat "$log"
# Growth: from the first sample taken after the first test line to the last sample.
awk -F, -v before="$lines_before" 'NR > 1 && $4 > before && !first {first = 1; r0 = $2; g0 = $3}
  NR > 1 {r1 = $2; g1 = $3}
  END {
    grew = 0
    if (first && r1 - r0 > 256 && r1 > r0 * 1.05) {print "host memory grew: " r0 " -> " r1 " MiB"; grew = 1}
    if (first && g1 - g0 > 256 && g1 > g0 * 1.05) {print "GPU memory grew: " g0 " -> " g1 " MiB"; grew = 1}
    if (!first) {print "no sample after the first test line: run longer"; exit 1}
    if (!grew) print "memory: host " r0 " -> " r1 " MiB, GPU " g0 " -> " g1 " MiB: no growth"
    exit grew
  }' "$csv" || status=1
exit $status
