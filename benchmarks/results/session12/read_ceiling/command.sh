#!/usr/bin/env bash
# session 12 call 3: build; synccheck over fused and ebm again (call 2's shard with most of them died at start);
# then the read ceiling of an energy-sized op (scratch/read_ceiling.py)
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
STEPS="build" bash tools/gpu_check.sh > "$OUT/build.out" 2>&1; grep "step\|Error" "$OUT/build.out"
SANITIZE_TESTS="tests/test_fused.py tests/test_ebm.py" SANITIZE_SHARDS=4 SANITIZE_BALANCE= TOOLS=synccheck \
  SANITIZE_TIMEOUT=330 SANITIZE_TEST_TIMEOUT=300 OUT="$OUT" timeout 340 bash tools/sanitize.sh > "$OUT/san.out" 2>&1
cat "$OUT/sanitize.log"; free -g | head -2; dmesg 2>/dev/null | grep -i "killed process" | tail -3
timeout 200 python3 scratch/read_ceiling.py 2>&1 | grep -v Warning | tee "$OUT/read_ceiling.log"
(cd "$OUT" && tar -czf /tmp/logs.tgz --exclude="*.tgz" . && find . -type f ! -name "*.tgz" ! -name sanitize.log ! -name "*times.log" ! -name read_ceiling.log -delete && mv /tmp/logs.tgz logs.tgz)
