# Session 43 call 5: cem_minimize's best row as an argmin over a float64 key (two kernels, as before the review's
# fix) against 477ceb2's nan_to_num + argmin; the sampling tests on the GPU.
set -u
unset PYTHONDONTWRITEBYTECODE
export JITKERNELS_CACHE=/tmp/jitkernels-cache MAX_JOBS=16 PYTHONUNBUFFERED=1
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
for root in kernels ab/s43/base/kernels; do for f in ebm sampling; do
  JITKERNELS_ROOT=$root python3 loader.py build $f > /dev/null 2>&1 & done; done; wait
timeout 100 python3 ab/s43/cem_time.py base=ab/s43/base/kernels new=kernels 2>&1 | tee $OUT/cem_time.log
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_sampling.py tests/test_distributed.py 2>&1 | tail -3 | tee $OUT/pytest.log
