#!/usr/bin/env bash
# session 10 call 1: build, then finish the sanitizer coverage (resume from session 9's logs)
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache
STEPS="build" bash tools/gpu_check.sh
S=benchmarks/results/session9
export SANITIZE_RESUME="$S/sanitize_a $S/sanitize_b $S/sanitize_c ${EXTRA_RESUME:-}"
export SANITIZE_RERUN="test_ebm|ackley|rastrigin"
export SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-430} SANITIZE_TEST_TIMEOUT=${SANITIZE_TEST_TIMEOUT:-420}
TOOLS="memcheck synccheck" SANITIZE_SHARDS=${MS_SHARDS:-2} OUT="$OUT" bash tools/sanitize.sh > "$OUT/san_ms.out" 2>&1 &
TOOLS="racecheck initcheck" SANITIZE_SHARDS=${RI_SHARDS:-7} SANITIZE_BALANCE=scratch/balance_ri.log OUT="$OUT" \
  bash tools/sanitize.sh > "$OUT/san_ri.out" 2>&1 &
wait
cat "$OUT/sanitize.log"
nvidia-smi --query-gpu=name --format=csv,noheader
(cd "$OUT" && tar -czf /tmp/logs.tgz --exclude="*.tgz" . && find . -type f ! -name "*.tgz" ! -name sanitize.log ! -name run.log -delete && mv /tmp/logs.tgz logs.tgz)
ls -la "$OUT"
