# Session 48, call 2: the CUDA chains' flat stream at D = 1, 2 (f8514a3): ebm's tests, then the chains at small D.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build tests" FAMILIES="ebm" PYTEST_ARGS="tests/test_ebm.py tests/test_stats_review.py" OUT=$OUT timeout 420 bash tools/gpu_check.sh
gzip -f $OUT/pytest.log; rm -f $OUT/build_*.log
PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache timeout 150 python3 benchmarks/results/session48/chains_small_d.py 2>&1 | tee $OUT/chains_small_d_after.log
