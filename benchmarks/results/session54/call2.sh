# Session 54, call 2: gn_mish_backward's kernel reworked after call 1 (58-64 us there: a warp per channel, Mish'
# twice): a group in registers, Mish' once, channel sums from shared memory, the convolution bias's gradient
# too. The diffusion family's GPU tests, then forward + backward timed against eager and torch.compile.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" OUT=$OUT timeout 170 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 60 python3 benchmarks/results/session54/probe_conv_train.py > $OUT/probe_conv_train.log 2>&1
grep "B=" $OUT/probe_conv_train.log
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 15 --timeout=180 -m "not large" tests/test_diffusion.py \
  tests/test_autograd.py tests/test_autocast.py tests/test_bad_input.py tests/test_leaks.py \
  -k "diffusion or conv or gn_mish or ddpm or ddim or swept" > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -12
gzip -f $OUT/pytest.log
timeout 90 python3 tools/shape_sweep.py --out $OUT --families train --match "conv1d_gn_mish" --max-seconds 70 > $OUT/sweep.log 2>&1
grep -v "^W1\|warn\|If it is\|check(" $OUT/sweep.log | tail -8
