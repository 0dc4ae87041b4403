# Session 54, call 7: the streaming kernels' group statistics shared (streamed_group_statistics): diffusion's GPU tests.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="diffusion" OUT=$OUT timeout 100 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 110 python3 -m pytest -q -p no:cacheprovider -n 15 --timeout=100 -m "not large" tests/test_diffusion.py > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -8
gzip -f $OUT/pytest.log
