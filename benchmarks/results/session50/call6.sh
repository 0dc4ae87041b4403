# Session 50, call 6: call 5's whole-suite run failed one test (an F at 85%, its name cut off by the time limit):
# the same suite, verbose, stopping at the first failure.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" OUT=$OUT timeout 110 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 400 python3 -m pytest -v -p no:cacheprovider -n 14 --maxfail=1 --timeout=300 -m "not large" > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -12
grep -n "^E " $OUT/pytest.log | head -20; gzip -f $OUT/pytest.log
