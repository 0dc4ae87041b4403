# Session 40 call 9: the vmap rules of the ops that draw (register_drawing_vmap) on CUDA: every family built;
# test_autograd's vmap / tag / checkpoint tests and test_determinism on both devices.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
t0=$(date +%s)
for f in $(python3 -c "import loader; print(*loader.families())"); do python3 loader.py build $f > $OUT/build_$f.log 2>&1 & done; wait
echo "build: $(( $(date +%s) - t0 )) s" >> $OUT/run.log
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_autograd.py tests/test_determinism.py \
  -k "vmap or nondeterministic or checkpointed or determin or reproduc or graph or seed" > $OUT/pytest.log 2>&1
tail -1 $OUT/pytest.log >> $OUT/run.log; grep -E "^FAILED" $OUT/pytest.log | head >> $OUT/run.log
echo "done: $(( $(date +%s) - t0 )) s" >> $OUT/run.log
rm -f $OUT/build_*.log
cat $OUT/run.log
