# Session 34 call 3: as call 2, with kron reading B in the widest pieces (VEC and BVEC halving to fit).
# linalg's CUDA tests and the >2^31-element kron test.
set -u
export PYTHONPATH=$PWD JITKERNELS_CACHE=/tmp/jitkernels-cache MAX_JOBS=16
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"
  echo "tree: $(cat commit.txt)"; } > $OUT/run.log 2>&1
start=$(date +%s)
python3 loader.py build linalg > $OUT/build_linalg.log 2>&1 &
JITKERNELS_ROOT=ab/s34/base/kernels python3 loader.py build linalg > $OUT/build_base.log 2>&1 &
wait
echo "builds $(( $(date +%s) - start )) s" >> $OUT/run.log
python3 ab/s34/kron_ab.py > $OUT/kron_ab.log 2>&1; echo "ab exit $?" >> $OUT/run.log
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 250 tests/test_linalg.py 2>&1 | tail -4 >> $OUT/run.log
timeout 120 python3 -m pytest -q -p no:cacheprovider -p no:xdist --timeout 100 tests/test_large.py -k kron 2>&1 | tail -3 >> $OUT/run.log
