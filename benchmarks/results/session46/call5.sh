# Session 46 call 5: ebm_local.cu's chunk loops shared by the row and run kernels (a refactor): ebm built, the
# ebm tests of every local-model energy and score (rows, tiles, runs) and the half-type backward; then ebm's
# wide rows timed again.
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES=ebm OUT=$OUT timeout 100 bash tools/gpu_check.sh > /dev/null
timeout 150 python3 -m pytest -v -p no:cacheprovider --timeout=300 -n 4 tests/test_ebm.py \
  -k "energy or score or wide_rows or local" > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -8
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
timeout 50 python3 ab/s46/wide_rows.py > $OUT/wide_rows.log 2>&1; grep "float32" $OUT/wide_rows.log | tail -20
