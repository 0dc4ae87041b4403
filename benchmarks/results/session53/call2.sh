# Session 53, call 2: the two fixes of call 1's sweep on the GPU (test_fused; test_ebm's Gaussian tests), the sweep's
# rows for them again, and the sweep's training cases (forward + backward of the differentiable ops).
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="fused ebm diffusion linalg" OUT=$OUT timeout 170 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 14 tests/test_fused.py tests/test_ebm.py -k "not ebm or gaussian or wide" > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -8
timeout 330 python3 tools/shape_sweep.py --out $OUT --families fused ebm train --max-seconds 300 \
  --match "relu_add transposed" "gaussian B=1024 D=1000" "gaussian B=4096 D=100" "backward" > $OUT/sweep.log 2>&1
grep -v "^W1\|warn" $OUT/sweep.log | tail -40
