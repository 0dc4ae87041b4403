#!/usr/bin/env bash
# Everything that needs a GPU, in one call (device tool: run "bash tools/gpu_check.sh").
# Builds every family, runs the whole test suite, the benchmarks, the load-time script and
# the examples; results go under $OUT (default ./gpu_out), to be committed as benchmarks/results/.
#   STEPS="build diag tests large bench load examples sanitize stress multi" (default: the first seven),
#   FAMILIES="fused ebm" (default: all), PYTEST_ARGS=... (default: the whole suite but `large`).
#   TEST_HALF=1 or 2: the tests step runs half the files (2: the six biggest kernel suites, 1: the rest). The whole
#   suite takes over 10 minutes on an H200 host, a device call's limit; each half took 5-7 minutes with
#   TEST_WORKERS=8 (session 51).
#   large: the >2^31-element tests, alone (memory). sanitize: tools/sanitize.sh. stress: 8 processes
#   building every real family on an empty cache. multi: the
#   torch.distributed example on every GPU of the host (run it on a machine with 2 or more).
#   firstrun: benchmarks/first_run.py (every family built on an empty cache, side by side and in turn).
#   audit: tools/audit_ops.py on the GPU (every op against its reference over special values, layouts, options).
#   profile: tools/profile_ops.py (each kernel's time per call, ours / eager / compile) for PROFILE_CASES;
#   ncu: Nsight Compute sections of our kernels for NCU_CASES (patterns separated by ';').
#   pack (last): the build cache into $OUT/jkcache.tgz (carry it back as JITKERNELS_CACHE to skip the
#   next machine's build) and every log into $OUT/logs.tgz, since only 8 files come back.
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
} 2>&1 | tee -a "$LOG"  # append: a later call with STEPS=pack must not wipe the earlier steps
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
    tests) big="test_(ebm|linalg|diffusion|autograd|fused|determinism)\.py"
           case ${TEST_HALF:-} in
             1) files=$(ls tests/test_*.py | grep -v -E "$big") ;;
             2) files=$(ls tests/test_*.py | grep -E "$big") ;;
             *) files= ;;
           esac
           $PY -m pytest -v -p no:cacheprovider --durations=15 --timeout=300 -n ${TEST_WORKERS:-4} -m "not large" \
             $files ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/pytest.log" | grep -E "FAILED|ERROR|passed|failed|sweep" | tail -40 \
             || status=1 ;;
    large) $PY -m pytest -v -p no:cacheprovider -p no:xdist --timeout=300 -m large 2>&1 | tee "$OUT/pytest_large.log" \
             | grep -E "PASS|FAIL|SKIP|ERROR|passed|failed" | tail -10 || status=1 ;;
    sanitize) OUT="$OUT" bash tools/sanitize.sh || status=1 ;;
    stress) JITKERNELS_STRESS_REAL=1 JITKERNELS_STRESS_TIMEOUT=420 $PY -m pytest -v -p no:cacheprovider -p no:xdist \
              tests/test_loader_stress.py -k real 2>&1 | tee "$OUT/pytest_stress.log" | tail -5 || status=1 ;;
    diag)  # which libstdc++ the built libraries carry (the image's CXX links it statically) and export
      { echo "CXX=${CXX:-c++}: $(${CXX:-c++} --version | head -1)"
        for so in $(find "$JITKERNELS_CACHE" -name "jk_*.so"); do
          echo "$so: $(nm -C --defined-only "$so" | grep -c "std::ostream::_M_insert\|std::num_put") libstdc++ symbols" \
               "inside, $(nm -D -C --defined-only "$so" | grep -c "std::ostream::_M_insert\|std::num_put") exported;" \
               "$(nm -D --defined-only "$so" | wc -l) dynamic symbols; needs: $(readelf -d "$so" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"
        done; } 2>&1 | tee "$OUT/diag.log" ;;
    multi)
      gpus=$(nvidia-smi -L | wc -l)
      NCCL_NVLS_ENABLE=0 timeout 500 torchrun --nproc_per_node="$gpus" examples/multi_gpu_sampling.py 2>&1 \
        | grep -v "^W1\|OMP_NUM_THREADS\|\*\*\*\*" | tee "$OUT/multi_gpu.log" || status=1 ;;
    bench) $PY benchmarks/run.py --out "$OUT" ${FAMILIES:+--families $FAMILIES} 2>&1 | grep -v "^|" | tail -60 || status=1
           $PY benchmarks/cpu_vs_gpu.py --out "$OUT" 2>&1 | tee "$OUT/cpu_vs_gpu.md" | tail -15 || status=1 ;;
    load)  $PY benchmarks/load_time.py --out "$OUT/load_time.json" 2>&1 | tail -6 || status=1 ;;
    firstrun) $PY benchmarks/first_run.py --out "$OUT/first_run.json" 2>&1 | tee "$OUT/first_run.log" || status=1 ;;
    audit) timeout 400 $PY tools/audit_ops.py --device cuda 2>&1 | tee "$OUT/audit.log" | tail -30 || status=1 ;;
    profile) IFS=';' read -ra cases <<< "${PROFILE_CASES:-diffusion ddpm_step drawn;diffusion conv1d_gn_mish B=1 C=256;linalg kron;sampling normal d=5000;ebm harmonic float32;ebm gaussian_score float32}"
      $PY tools/profile_ops.py "${cases[@]}" 2>&1 | tee "$OUT/profile.log" || status=1 ;;
    ncu)
      IFS=';' read -ra cases <<< "${NCU_CASES:-diffusion ddpm_step drawn;diffusion conv1d_gn_mish B=1 C=256;linalg kron;sampling normal d=5000 float32;ebm harmonic_energy float32;ebm harmonic_score float32}"
      for pattern in "${cases[@]}"; do
        echo "== ncu: $pattern"
        timeout 120 ncu --clock-control none --kernel-name-base demangled -k "regex:(jk|ebm|sampling|diffusion|linalg|fused)::" \
          --launch-skip 3 --launch-count 1 --section SpeedOfLight --section LaunchStats --section Occupancy \
          --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
          $PY tools/profile_ops.py --ours-only --calls 1 "$pattern" 2>&1 | grep -v "^==PROF==" || status=1
      done 2>&1 | tee "$OUT/ncu.log" ;;
    pack)
      tar -czf "$OUT/jkcache.tgz" -C "$JITKERNELS_CACHE" --exclude=.lock --exclude="*.tmp*" . 2>/dev/null
      (cd "$OUT" && tar -czf /tmp/jk-logs.tgz --exclude="*.tgz" . ; find . -type f ! -name "*.tgz" -delete
       mv /tmp/jk-logs.tgz logs.tgz) ;;
    examples)
      for example in ebm_sampling cem_optimize diffusion_policy shampoo_mlp multi_gpu_sampling; do
        echo "== examples/$example.py"
        timeout 240 $PY examples/$example.py --out /tmp/examples-out 2>&1 | tail -25 || status=1
      done 2>&1 | tee "$OUT/examples.log" ;;
  esac
  echo "== step $step took $(( $(date +%s) - start )) s" | tee -a "$LOG"
done
exit $status
