# Session 41 call 6: the final tree's Python-only changes after call 5 (a kernels root that is not a folder,
# the merged --help test, run.py's progress line): every family built, then the loader, walkthrough,
# benchmark and sampling tests on the GPU host.
set -u
export PYTHONUNBUFFERED=1 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 loader.py build > $OUT/build.log 2>&1
timeout 420 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_loader.py tests/test_walkthrough.py \
  tests/test_benchmarks.py tests/test_sampling.py 2>&1 | tail -3 >> $OUT/run.log
cat $OUT/run.log
