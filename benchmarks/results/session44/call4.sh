# Session 44 call 4: after call 3 only sampling/ops.py changed (cem_minimize takes a number std): the sampling
# and distributed test files on the GPU.
set -u
unset PYTHONDONTWRITEBYTECODE
export JITKERNELS_CACHE=/tmp/jitkernels-cache MAX_JOBS=16 PYTHONUNBUFFERED=1
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
python3 loader.py build > $OUT/build.log 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_sampling.py tests/test_distributed.py 2>&1 \
  | tail -3 | tee $OUT/pytest.log
