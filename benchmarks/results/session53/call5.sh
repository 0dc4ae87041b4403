# Session 53, call 5: the test files call 4 did not run (the loader's, determinism, statistics, leaks, examples,
# walkthrough, distributed), on this session's final code (load_for, the pickling of kept ops).
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" OUT=$OUT timeout 150 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 270 python3 -m pytest -q -p no:cacheprovider -n 15 --timeout=250 -m "not large and not slow" tests/test_loader.py \
  tests/test_loader_review.py tests/test_determinism.py tests/test_stats_review.py tests/test_leaks.py \
  tests/test_examples.py tests/test_walkthrough.py tests/test_distributed.py > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -12
gzip -f $OUT/pytest.log
