# Session 54, call 4: the final code (Mish' held at 1 from its clamp, the review's fixes): the GPU tests of the
# families whose differentiable ops route through jk.h's changed route_autograd, and of diffusion again.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" OUT=$OUT timeout 170 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 370 python3 -m pytest -q -p no:cacheprovider -n 15 --timeout=340 -m "not large" tests/test_ebm.py tests/test_linalg.py \
  tests/test_diffusion.py tests/test_autograd.py tests/test_fused.py tests/test_autocast.py tests/test_bad_input.py \
  tests/test_sampling.py > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -12
gzip -f $OUT/pytest.log
