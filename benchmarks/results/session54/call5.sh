# Session 54, call 5: the final code after the readability review (partial_at, one double Mish', the schema's eps
# default): diffusion's GPU tests and the training probe again.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="diffusion" OUT=$OUT timeout 120 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 15 --timeout=140 -m "not large" tests/test_diffusion.py > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -8
gzip -f $OUT/pytest.log
timeout 80 python3 benchmarks/results/session54/probe_conv_train.py > $OUT/probe_conv_train.log 2>&1
grep "B=\|shape" $OUT/probe_conv_train.log
