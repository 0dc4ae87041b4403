# Session 39 call 4: small_product rewritten (warp rows x lane columns, clamped indices, A read 16 bytes
# at a time where n allows): linalg built from HEAD's kernels (ab/s39/base) and from this tree, timed in
# alternating rounds in one process; linalg's whole suite; the four sanitizer tools over the inverse-root
# tests that reach the small kernel (as call 2).
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
JITKERNELS_ROOT=ab/s39/base/kernels python3 loader.py build linalg > $OUT/build_base.log 2>&1 &
python3 loader.py build linalg > $OUT/build_new.log 2>&1; wait
tail -qn1 $OUT/build_base.log $OUT/build_new.log | tee -a $OUT/run.log
echo "builds: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 200 python3 benchmarks/results/session39/scripts/ab_small_roots.py base=ab/s39/base/kernels new=kernels 3 \
  > $OUT/ab_small_roots.log 2>&1; tee -a $OUT/run.log < $OUT/ab_small_roots.log
echo "ab: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 150 tests/test_linalg.py > $OUT/pytest.log 2>&1
tail -1 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR|^E " $OUT/pytest.log | head -20 | tee -a $OUT/run.log
gzip -f $OUT/pytest.log
echo "tests: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
SANITIZE_TESTS="tests/test_linalg.py" SANITIZE_SHARDS=2 SANITIZE_BALANCE= SANITIZE_TIMEOUT=240 SANITIZE_TEST_TIMEOUT=150 \
  SANITIZE_K="inverse_root and not large and not bf16_pieces and not ignores_tf32 and not accuracy_bar" \
  OUT=$OUT/san bash tools/sanitize.sh > $OUT/sanitize_stdout.log 2>&1
echo "sanitize rc $? after $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
grep -E "^(memcheck|racecheck|initcheck|synccheck):" $OUT/san/sanitize.log | tee -a $OUT/run.log
tar czf $OUT/san_logs.tgz -C $OUT san && rm -rf $OUT/san
