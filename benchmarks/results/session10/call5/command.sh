#!/usr/bin/env bash
# session 10 call 4: build, racecheck over what is left (Hopper GEMMs now instrumented), then ebm's normal tests
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache
STEPS="build" bash tools/gpu_check.sh > /dev/null 2>&1  # cached when warm
S=benchmarks/results
export SANITIZE_RESUME="$S/session9/sanitize_b $S/session9/sanitize_c $S/session10/call1 $S/session10/call4"
export SANITIZE_RERUN="test_ebm|ackley|rastrigin"
TOOLS=racecheck SANITIZE_SHARDS=14 SANITIZE_BALANCE=scratch/balance_race.log SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-300} \
  SANITIZE_TEST_TIMEOUT=320 OUT="$OUT" bash tools/sanitize.sh > "$OUT/san_race.out" 2>&1
cat "$OUT/sanitize.log"
(cd "$OUT" && tar -czf /tmp/logs.tgz --exclude="*.tgz" . && find . -type f ! -name "*.tgz" ! -name sanitize.log ! -name pytest_ebm.log ! -name "*times.log" -delete && mv /tmp/logs.tgz logs.tgz)
