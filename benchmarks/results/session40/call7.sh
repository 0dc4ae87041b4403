# Session 40 call 7: call 6's table had matrix_inverse_root n = 256 at 1117 us (session 27's table: 577):
# linalg of session 37's final tree (20fa611), of this session's start (e096343) and of HEAD, in one process,
# alternating rounds (the general route is host-bound: ~70 launches a call). Then load_time.py on HEAD (#2;
# every op now registers one more kernel at load).
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
JITKERNELS_ROOT=ab/s40/s37/kernels python3 loader.py build linalg > $OUT/build_s37.log 2>&1 &
JITKERNELS_ROOT=ab/s40/start/kernels python3 loader.py build linalg > $OUT/build_start.log 2>&1 &
python3 loader.py build linalg > $OUT/build_head.log 2>&1; wait
tail -qn1 $OUT/build_*.log | cut -c1-60 >> $OUT/run.log
echo "builds: $(( $(date +%s) - t0 )) s" >> $OUT/run.log
timeout 200 python3 benchmarks/results/session40/scripts/ab_large_roots.py s37=ab/s40/s37/kernels \
  start=ab/s40/start/kernels head=kernels 3 > $OUT/ab_large.log 2>&1
grep "^{" $OUT/ab_large.log >> $OUT/run.log; tail -2 $OUT/ab_large.log | grep -v "^{" >> $OUT/run.log
echo "ab: $(( $(date +%s) - t0 )) s" >> $OUT/run.log
timeout 200 python3 benchmarks/load_time.py --out $OUT/load_time.json > $OUT/load_time.log 2>&1
tail -5 $OUT/load_time.log >> $OUT/run.log
echo "done: $(( $(date +%s) - t0 )) s" >> $OUT/run.log
cat $OUT/run.log
