# Session 41 call 8: vmap rules for relu_add, matrix_inverse_root and kron (f78bd5a, 0a876cb): fused's and
# linalg's tests on the GPU, the warm-load tests; then fused's warm load before the relu_add rule (0a876cb)
# against HEAD, 20 alternating fresh processes each (#2: the rule's two registrations).
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 loader.py build fused linalg > $OUT/build.log 2>&1 &
(cd ab/s41/before && JITKERNELS_CACHE=/tmp/jkc-warm-before python3 loader.py build fused > /dev/null 2>&1) &
wait
JITKERNELS_CACHE=/tmp/jkc-warm-head python3 loader.py build fused > /dev/null 2>&1
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_fused.py tests/test_linalg.py \
  tests/test_loader.py -k "not stress" 2>&1 | tail -3 >> $OUT/run.log
python3 benchmarks/results/session41/warm_ab.py before=ab/s41/before head=. 20 >> $OUT/run.log 2>&1
cat $OUT/run.log
