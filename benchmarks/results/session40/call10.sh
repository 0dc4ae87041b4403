# Session 40 call 10: ccfc78a (in-place ops refuse inference tensors before writing): every family built;
# the in-place, vmap and tag tests of test_autograd and the warm-load-prints-nothing test, on both devices.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
t0=$(date +%s)
for f in $(python3 -c "import loader; print(*loader.families())"); do python3 loader.py build $f > $OUT/build_$f.log 2>&1 & done; wait
echo "build: $(( $(date +%s) - t0 )) s" >> $OUT/run.log
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_autograd.py tests/test_loader.py \
  -k "in_place or inference or vmap or nondeterministic or prints_nothing" > $OUT/pytest.log 2>&1
tail -1 $OUT/pytest.log >> $OUT/run.log; grep -E "^FAILED" $OUT/pytest.log | head >> $OUT/run.log
echo "done: $(( $(date +%s) - t0 )) s" >> $OUT/run.log
rm -f $OUT/build_*.log
cat $OUT/run.log
