#!/usr/bin/env bash
# session 11 call 1: build, which compute-sanitizer options could see cuBLAS's GEMM writes (initcheck), tests
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
STEPS="build" bash tools/gpu_check.sh > /dev/null 2>&1
cp "$OUT/run.log" "$OUT/run_build.log"
CS=compute-sanitizer
{
  $CS --version | tail -1
  $CS --help > "$OUT/cs_help.txt" 2>&1
  grep -n -i "bulk\|tma\|mma\|async\|init\|unused\|memset" "$OUT/cs_help.txt"
  end=$(( $(date +%s) + 150 ))
  for opt in "" $(grep -oE -- "--(check|track)-[a-z-]+" "$OUT/cs_help.txt" | sort -u); do
    [ "$(date +%s)" -gt "$end" ] && { echo "probe: out of time before $opt"; break; }
    case "$opt" in --check-exit-code|--check-device-heap|--check-api-memory-access|--track-stream-ordered-races) continue;; esac
    n=$(timeout 60 $CS --tool initcheck --show-backtrace no ${opt:+$opt yes} python3 benchmarks/results/session10/diag/diag.py bmm 2>&1 | tee /tmp/probe.log | grep -c "Uninitialized")
    echo "initcheck ${opt:-(defaults)} yes: $n uninitialized-read reports; $(grep -m1 -i "error\|unrecognized\|invalid" /tmp/probe.log)"
  done
} 2>&1 | tee "$OUT/initcheck_probe.log"
STEPS="tests" bash tools/gpu_check.sh > "$OUT/gpu_check_tests.out" 2>&1
cat "$OUT/run.log" >> "$OUT/run_build.log"; mv "$OUT/run_build.log" "$OUT/run.log"
grep -E "passed|failed" "$OUT/pytest.log" | tail -3
(cd "$OUT" && tar -czf /tmp/logs.tgz --exclude="*.tgz" . && find . -type f ! -name "*.tgz" ! -name run.log ! -name initcheck_probe.log ! -name pytest.log -delete && mv /tmp/logs.tgz logs.tgz)
ls -la "$OUT"
