# Session 51, call 5: call 2 again (its one failure, in test_determinism, now prints the generator state before each replay and which replays are equal
# a fresh machine).
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" OUT=$OUT timeout 120 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
FILES=$(ls tests/test_*.py | grep -E "test_(ebm|linalg|diffusion|autograd|fused|determinism)\.py")
timeout 540 python3 -m pytest -v -p no:cacheprovider -n 12 --durations=25 --timeout=300 -m "not large" $FILES > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -15
grep -n "^E " $OUT/pytest.log | head -20; grep -c PASSED $OUT/pytest.log; gzip -f $OUT/pytest.log
