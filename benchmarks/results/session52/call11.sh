# Session 52, call 11: the same tests on the final code (a failed graph kept only where capture_end raised early).
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="sampling" OUT=$OUT timeout 150 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 200 python3 -m pytest -v -p no:cacheprovider -n 4 tests/test_sampling.py -k "cuda_graph or cem_minimize" > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -8
