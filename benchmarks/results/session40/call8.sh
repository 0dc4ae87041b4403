# Session 40 call 8: 32b68df (the no-backend kernel names the device a build lacks): every family built; the
# new GPU test of that message, the warm-load-prints-nothing test, and the bad-input sweep's None cases.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
t0=$(date +%s)
for f in $(python3 -c "import loader; print(*loader.families())"); do python3 loader.py build $f > $OUT/build_$f.log 2>&1 & done; wait
cat $OUT/build_*.log | grep -c Overriding | sed 's/^/override warnings: /' >> $OUT/run.log
echo "build: $(( $(date +%s) - t0 )) s" >> $OUT/run.log
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_loader.py tests/test_bad_input.py \
  -k "cuda_half_names or prints_nothing or None" > $OUT/pytest.log 2>&1
tail -1 $OUT/pytest.log >> $OUT/run.log; grep -E "^FAILED" $OUT/pytest.log | head >> $OUT/run.log
echo "done: $(( $(date +%s) - t0 )) s" >> $OUT/run.log
rm -f $OUT/build_*.log
cat $OUT/run.log
