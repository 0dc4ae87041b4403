# Session 46 call 4: the wide rows' partial sums added by a warp a row (call 3's B = 4 rows: one thread added 1536
# runs' partials, 93 us): every family built, test_ebm's wide-row tests, then ebm's wide rows timed again.
set -u
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES=ebm OUT=$OUT timeout 100 bash tools/gpu_check.sh > /dev/null
timeout 120 python3 -m pytest -v -p no:cacheprovider --timeout=300 -n 4 tests/test_ebm.py -k "wide_rows" > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -8
gzip -f $OUT/pytest.log
rm -f $OUT/build_*.log
timeout 60 python3 ab/s46/wide_rows.py > $OUT/wide_rows.log 2>&1; tail -40 $OUT/wide_rows.log
