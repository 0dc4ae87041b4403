# Session 39 call 3: session 38's unexplained float32 n = 48 / 64 gap, on one host: linalg built from
# 00a6064's kernels (the small kernel before the shared driver; ab/s39/old, from git archive) and from
# this tree, timed in alternating rounds in one process; then the small-route tests (the graph test is
# new: split off in call 2's tree).
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
JITKERNELS_ROOT=ab/s39/old/kernels python3 loader.py build linalg > $OUT/build_old.log 2>&1 &
python3 loader.py build linalg > $OUT/build_new.log 2>&1; wait
tail -qn1 $OUT/build_old.log $OUT/build_new.log | tee -a $OUT/run.log
echo "builds: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 300 python3 benchmarks/results/session39/scripts/ab_small_roots.py old=ab/s39/old/kernels new=kernels 3 \
  > $OUT/ab_small_roots.log 2>&1; tee -a $OUT/run.log < $OUT/ab_small_roots.log
echo "ab: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 120 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 100 tests/test_linalg.py -k "small or diagonal or identity" \
  > $OUT/pytest.log 2>&1; tail -2 $OUT/pytest.log | tee -a $OUT/run.log
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader >> $OUT/run.log
echo "done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
