#!/usr/bin/env bash
# session 12 call 4 (warm): synccheck over the bad-input sweep (call 2's shard died at start); the whole
# harness, the CPU-vs-GPU table and the load times on the final code
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
SANITIZE_TESTS="tests/test_bad_input.py" SANITIZE_SHARDS=4 SANITIZE_BALANCE= TOOLS=synccheck \
  SANITIZE_TIMEOUT=200 OUT="$OUT" timeout 210 bash tools/sanitize.sh > "$OUT/san.out" 2>&1; head -1 "$OUT/sanitize.log"
STEPS="build bench load" bash tools/gpu_check.sh 2>&1 | grep -E "step|copy rate|Error" 
(cd "$OUT" && tar -czf /tmp/logs.tgz --exclude="*.tgz" --exclude="*.png" . && find . -type f ! -name "*.tgz" ! -name sanitize.log ! -name run.log ! -name "nvidia-h200.*" ! -name "cpu_vs_gpu.md" ! -name load_time.json -delete && mv /tmp/logs.tgz logs.tgz; ls)
