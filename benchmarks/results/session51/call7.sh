# Session 51, call 7: call 6 showed that a synchronize in another thread invalidates the capture in both modes; the test now
# allocates in the other thread instead (a cudaMalloc), against the same mutant.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="sampling ebm" OUT=$OUT timeout 120 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 200 python3 -m pytest -v -p no:cacheprovider -n 4 tests/test_sampling.py -k "cuda_graph or cem_minimize" > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -8
sed -i 's/capture_error_mode="thread_local"/capture_error_mode="global"/' kernels/sampling/ops.py
grep -c 'capture_error_mode="global"' kernels/sampling/ops.py
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_sampling.py -k "other_threads or reuses_its_memory" > $OUT/pytest_mutant.log 2>&1
grep -E "^E |passed|failed" $OUT/pytest_mutant.log | head -8
sed -i 's/capture_error_mode="global"/capture_error_mode="thread_local"/' kernels/sampling/ops.py
