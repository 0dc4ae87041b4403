# Session 46 call 3: ebm's wide rows in more, shorter runs (a full GPU's warps, runs of 4+ chunks): every family
# built; the wide-row tests of test_ebm, and the test files call 2's time limit cut off (test_loader_stress,
# test_portability, one sampling test); then ebm's wide rows timed again (ab/s46/wide_rows.py).
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" OUT=$OUT timeout 100 bash tools/gpu_check.sh > /dev/null
timeout 230 python3 -m pytest -v -p no:cacheprovider --timeout=300 -n 4 tests/test_ebm.py tests/test_loader_stress.py \
  tests/test_portability.py tests/test_sampling.py \
  -k "wide_rows or loader_stress or portability or normal_moments_and_independence" > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -8
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
timeout 60 python3 ab/s46/wide_rows.py > $OUT/wide_rows.log 2>&1; tail -40 $OUT/wide_rows.log
