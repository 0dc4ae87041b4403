# Session 54, call 3: conv1d_gn_mish's backward without its no-op casts (host time); the probe now reports wall time
# per iteration beside device time, at six sizes; then the GPU tests of every file the change touches.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" OUT=$OUT timeout 170 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 80 python3 benchmarks/results/session54/probe_conv_train.py > $OUT/probe_conv_train.log 2>&1
grep "B=\|shape" $OUT/probe_conv_train.log
timeout 280 python3 -m pytest -q -p no:cacheprovider -n 15 --timeout=250 -m "not large" tests/test_diffusion.py \
  tests/test_autograd.py tests/test_autocast.py tests/test_bad_input.py tests/test_leaks.py tests/test_determinism.py > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -12
gzip -f $OUT/pytest.log
