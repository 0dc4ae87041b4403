# Session 52, call 12: the last Python-side checks (Shampoo's block_size, p=True, string/bool model parameters) with
# test_linalg's Shampoo and inverse-root tests and test_ebm's parameter tests on the GPU host.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="linalg ebm" OUT=$OUT timeout 150 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 14 tests/test_linalg.py tests/test_ebm.py -k "shampoo or inverse_root or parameter" > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -8
