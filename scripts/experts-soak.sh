#!/usr/bin/env bash
# The hybrid placement's soak run (docs/experts.md, Testing): one `strata bench` process runs cycles of prompts of
# 100, 1000 and 8000 tokens and a decode of 256 (each test a fresh session: its KV cache and buffers made and
# freed), for about SOAK_SECONDS (default 300), while its resident host memory and (on a GPU) the GPU memory in
# use are sampled every SAMPLE_SECONDS (default 5). It fails when either grows by more than 5% and 256 MiB from the
# first sample after the first cycle (every size has run once) to the last sample before the process ends, or when
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

# bench runs its tests depth by depth, so a depth of 0 given N times is N cycles of every size. One cycle first,
# whose tests' own time (a warm-up and a timed run each: 2 x tokens / (tokens/s), the model's load left out) says
# how many cycles fill the duration.
read -r -a prompts <<<"${PROMPTS:-100 1000 8000}"
tests_per_cycle=$((${#prompts[@]} + 1))
"$strata" bench --model "$model" -p "${prompts[@]}" -n "${DECODE:-256}" -r 1 --log-level warn "$@" >"$log" 2>&1
cycle_ms=$(awk '{
    for (i = 2; i <= NF; i++) if ($i == "t/s") {
      tokens = 0
      for (j = 1; j < i; j++) if ($j ~ /^(pp|tg)[0-9]+$/) tokens = substr($j, 3)
      speed = ($(i - 2) == "±") ? $(i - 3) : $(i - 1)
      if (tokens > 0 && speed > 0) ms += 2 * 1000 * tokens / speed
    }
  } END {print int(ms)}' "$log")
cycles=$((duration * 1000 / (cycle_ms > 0 ? cycle_ms : 1)))
[ "$cycles" -ge 2 ] || cycles=2
echo "one cycle's tests took ${cycle_ms} ms: ${cycles} cycles" | tee -a "$log"
depths=()
for ((c = 0; c < cycles; c++)); do depths+=(0); done

"$strata" bench --model "$model" -p "${prompts[@]}" -n "${DECODE:-256}" -d "${depths[@]}" -r 1 --log-level warn "$@" \
  >>"$log" 2>&1 &
pid=$!
echo "seconds,rss_mib,gpu_mib,lines" >"$csv"
# Test lines so far (bench prints one per test; --stats adds others).
test_lines() { grep -c ' t/s' "$log" || true; }
begin=$(date +%s) last_line=$(date +%s) lines=$(test_lines) status=0
lines_before=$lines
while kill -0 "$pid" 2>/dev/null; do
  sleep "$interval"
  rss=$(awk '/^VmRSS:/ {print int($2 / 1024)}' "/proc/$pid/status" 2>/dev/null || true)
  [ -n "$rss" ] || break  # the process ended during the sleep
  gpu=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
    awk -F', ' -v p="$pid" '$1 == p {print $2}' || true)
  now_lines=$(test_lines)
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
# Growth: from the first sample after the first cycle's lines to the last sample before the last line (after it,
# the process frees everything on its way out).
awk -F, -v first_cycle="$((lines_before + tests_per_cycle))" '
  NR > 1 {rows++; seconds[rows] = $1; rss[rows] = $2; gpu[rows] = $3; seen[rows] = $4; if ($4 > last) last = $4}
  END {
    for (k = 1; k <= rows; k++) {
      if (seen[k] < first_cycle || seen[k] >= last) continue
      if (!from) {from = k}
      to = k
    }
    if (!from) {print "no sample between the first cycle and the last line: run longer"; exit 1}
    r0 = rss[from]; g0 = gpu[from]; r1 = rss[to]; g1 = gpu[to]; grew = 0
    if (r1 - r0 > 256 && r1 > r0 * 1.05) {print "host memory grew: " r0 " -> " r1 " MiB"; grew = 1}
    if (g1 - g0 > 256 && g1 > g0 * 1.05) {print "GPU memory grew: " g0 " -> " g1 " MiB"; grew = 1}
    if (!grew) printf "memory from %d s to %d s: host %d -> %d MiB, GPU %d -> %d MiB: no growth\n", seconds[from], seconds[to], r0, r1, g0, g1
    exit grew
  }' "$csv" || status=1
exit $status
