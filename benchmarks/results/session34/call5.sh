# Session 34 call 5: kron, three trees: base (HEAD's kernels), v1 (call 3's: two vectors per thread, each from four divisions)
# and new (the working tree: 32 bytes per thread, the next vector's column by a carry); then linalg's CUDA tests
# and the >2^31-element kron test on the new tree.
set -u
export PYTHONPATH=$PWD JITKERNELS_CACHE=/tmp/jitkernels-cache MAX_JOBS=16
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"
  echo "tree: $(cat commit.txt)"; } > $OUT/run.log 2>&1
start=$(date +%s)
python3 loader.py build linalg > $OUT/build_linalg.log 2>&1 &
JITKERNELS_ROOT=ab/s34/base/kernels python3 loader.py build linalg > $OUT/build_base.log 2>&1 &
JITKERNELS_ROOT=ab/s34/v1/kernels python3 loader.py build linalg > $OUT/build_v1.log 2>&1 &
wait
echo "builds $(( $(date +%s) - start )) s" >> $OUT/run.log
python3 ab/s34/kron_ab.py base=ab/s34/base/kernels v1=ab/s34/v1/kernels new=kernels > $OUT/kron_ab.log 2>&1
echo "ab exit $?" >> $OUT/run.log
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 250 tests/test_linalg.py 2>&1 | tail -2 >> $OUT/run.log
timeout 120 python3 -m pytest -q -p no:cacheprovider -p no:xdist --timeout 100 tests/test_large.py -k kron 2>&1 | tail -2 >> $OUT/run.log
