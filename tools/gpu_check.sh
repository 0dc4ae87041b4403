#!/usr/bin/env bash
# Everything that needs a GPU, in one call (device tool: run "bash tools/gpu_check.sh").
# Builds every family, runs the whole test suite, the benchmarks, the load-time script and
# the examples; results go under $OUT (default ./gpu_out), to be committed as benchmarks/results/.
#   STEPS="build diag tests large bench load examples sanitize stress multi" (default: the first seven),
#   FAMILIES="fused ebm" (default: all), PYTEST_ARGS=... (default: the whole suite but `large`).
#   large: the >2^31-element tests, alone (memory). sanitize: tools/sanitize.sh. stress: 8 processes
#   building every real family on an empty cache. multi: the
#   torch.distributed example on every GPU of the host (run it on a machine with 2 or more).
set -u -o pipefail
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 JITKERNELS_CACHE=${JITKERNELS_CACHE:-/tmp/jitkernels-cache} MAX_JOBS=${MAX_JOBS:-16}
STEPS=${STEPS:-build diag tests large bench load examples}
PY=${PYTHON:-python3}
LOG="$OUT/run.log"
status=0
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  $PY -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"
  nvcc --version | tail -1
} 2>&1 | tee "$LOG"
for step in $STEPS; do
  start=$(date +%s)
  case $step in
    build)  # one process per family, at once: the cold build costs the slowest family, not the sum
      for family in ${FAMILIES:-$($PY -c "import loader; print(*loader.families())")}; do
        $PY loader.py build "$family" > "$OUT/build_$family.log" 2>&1 &
      done
      wait
      cat "$OUT"/build_*.log | tee -a "$LOG"
      grep -q "BuildError\|Traceback" "$OUT"/build_*.log && status=1 ;;
    tests) $PY -m pytest -v -p no:cacheprovider --durations=15 --timeout=300 -n ${TEST_WORKERS:-4} -m "not large" \
             ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/pytest.log" | grep -E "FAILED|ERROR|passed|failed|sweep" | tail -40 \
             || status=1 ;;
    large) $PY -m pytest -v -p no:cacheprovider -p no:xdist --timeout=300 -m large 2>&1 | tee "$OUT/pytest_large.log" \
             | grep -E "PASS|FAIL|SKIP|ERROR|passed|failed" | tail -10 || status=1 ;;
    sanitize) OUT="$OUT" bash tools/sanitize.sh || status=1 ;;
    stress) JITKERNELS_STRESS_REAL=1 JITKERNELS_STRESS_TIMEOUT=420 $PY -m pytest -v -p no:cacheprovider -p no:xdist \
              tests/test_loader_stress.py -k real 2>&1 | tee "$OUT/pytest_stress.log" | tail -5 || status=1 ;;
    diag)  # why number formatting crashed here: which libstdc++ the built libraries carry
      { which c++ g++; c++ --version | head -1; c++ -print-file-name=libstdc++.so; c++ -print-file-name=libstdc++.a
        for so in $(find "$JITKERNELS_CACHE" -name "jk_*.so"); do
          echo "$so: $(nm -C --defined-only "$so" | grep -c "std::ostream::_M_insert\|std::num_put") libstdc++ symbols defined inside"
        done; } 2>&1 | tee "$OUT/diag.log" ;;
    multi)
      gpus=$(nvidia-smi -L | wc -l)
      NCCL_NVLS_ENABLE=0 timeout 500 torchrun --nproc_per_node="$gpus" examples/multi_gpu_sampling.py 2>&1 \
        | grep -v "^W1\|OMP_NUM_THREADS\|\*\*\*\*" | tee "$OUT/multi_gpu.log" || status=1 ;;
    bench) $PY benchmarks/run.py --out "$OUT" ${FAMILIES:+--families $FAMILIES} 2>&1 | grep -v "^|" | tail -60 || status=1
           $PY benchmarks/cpu_vs_gpu.py --out "$OUT" 2>&1 | tee "$OUT/cpu_vs_gpu.md" | tail -15 || status=1 ;;
    load)  $PY benchmarks/load_time.py --out "$OUT/load_time.json" 2>&1 | tail -6 || status=1 ;;
    examples)
      for example in ebm_sampling cem_optimize diffusion_policy shampoo_mlp multi_gpu_sampling; do
        echo "== examples/$example.py"
        timeout 240 $PY examples/$example.py --out /tmp/examples-out 2>&1 | tail -25 || status=1
      done 2>&1 | tee "$OUT/examples.log" ;;
  esac
  echo "== step $step took $(( $(date +%s) - start )) s" | tee -a "$LOG"
done
exit $status
