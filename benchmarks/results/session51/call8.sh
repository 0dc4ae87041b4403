# Session 51, call 8: a failed capture now raises an error that says what happened (the subprocess test), and the
# cuda_graph tests again.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="sampling" OUT=$OUT timeout 100 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 100 python3 -m pytest -v -p no:cacheprovider -n 4 tests/test_sampling.py -k "cuda_graph" > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -8; grep -n "^E " $OUT/pytest.log | head -10
