# Session 53, call 3: the GPU tests of everything changed so far (fused, ebm's Gaussian, the autograd fixes, kron's
# and conv1d_gn_mish's backwards), the training sweep again, and a profile of two backwards.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" OUT=$OUT timeout 170 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 260 python3 -m pytest -q -p no:cacheprovider -n 14 --timeout=240 -m "not large" tests/test_ebm.py tests/test_linalg.py \
  tests/test_diffusion.py tests/test_autograd.py tests/test_fused.py tests/test_autocast.py tests/test_bad_input.py > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -12
timeout 45 python3 benchmarks/results/session53/probe_backward.py > $OUT/probe_backward.log 2>&1
timeout 150 python3 tools/shape_sweep.py --out $OUT --families train --max-seconds 130 > $OUT/sweep.log 2>&1
grep -v "^W1\|warn\|If it is\|check(" $OUT/sweep.log | tail -32
gzip -f $OUT/pytest.log
