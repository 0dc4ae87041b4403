#!/usr/bin/env bash
# Everything that needs a GPU, in one call (device tool: run "bash tools/gpu_check.sh").
# Builds every family, runs the whole test suite, the load-time script and the benchmarks;
# results go under $OUT (default ./gpu_out) to be committed as benchmarks/results/.
#   STEPS="build tests load bench" (default: all), FAMILIES="fused ebm" (default: all), PYTEST_ARGS=...
set -u -o pipefail
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 JITKERNELS_CACHE=${JITKERNELS_CACHE:-/tmp/jitkernels-cache} MAX_JOBS=${MAX_JOBS:-16}
STEPS=${STEPS:-build tests load bench}
PY=${PYTHON:-python3}
status=0
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  $PY -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"
  nvcc --version | tail -1
} 2>&1 | tee "$OUT/environment.txt"
for step in $STEPS; do
  start=$(date +%s)
  case $step in
    build) $PY loader.py build ${FAMILIES:---all} 2>&1 | tee "$OUT/build.log" || status=1 ;;
    tests) $PY -m pytest -v -p no:cacheprovider --durations=15 ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/pytest.log" | tail -60 || status=1 ;;
    load)  $PY benchmarks/load_time.py --out "$OUT/load_time.json" 2>&1 | tail -8 || status=1 ;;
    bench) $PY benchmarks/run.py --out "$OUT" ${FAMILIES:+--families $FAMILIES} 2>&1 | tee "$OUT/bench.log" | tail -80 || status=1 ;;
  esac
  echo "== step $step took $(( $(date +%s) - start )) s"
done
exit $status
