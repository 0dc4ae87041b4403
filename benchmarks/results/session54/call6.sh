# Session 54, call 6: group_statistics shared by the GroupNorm + Mish kernel and its backward: diffusion's GPU tests,
# the forward's conv1d_gn_mish rows of benchmarks/run.py (the bars) and the training probe.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="diffusion" OUT=$OUT timeout 120 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 15 --timeout=140 -m "not large" tests/test_diffusion.py > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -8
gzip -f $OUT/pytest.log
timeout 60 python3 benchmarks/run.py --families diffusion --match "conv1d_gn_mish" > $OUT/bench.log 2>&1
grep "conv1d_gn_mish" $OUT/bench.log | head -8
timeout 70 python3 benchmarks/results/session54/probe_conv_train.py > $OUT/probe_conv_train.log 2>&1
grep "B=" $OUT/probe_conv_train.log
