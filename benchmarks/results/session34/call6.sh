# Session 34 call 6: kron, four trees: base (HEAD's kernels), cursor (call 5's "new"), new (the working tree:
# rows that would take one element per store go through kron_flat_kernel's 16-byte vectors across rows) and
# flatall (every row length not a multiple of 16 bytes goes flat); then linalg's CUDA tests and the
# >2^31-element kron test on the new tree.
set -u
export PYTHONPATH=$PWD JITKERNELS_CACHE=/tmp/jitkernels-cache MAX_JOBS=16
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"
  echo "tree: $(cat commit.txt)"; } > $OUT/run.log 2>&1
start=$(date +%s)
python3 loader.py build linalg > $OUT/build_linalg.log 2>&1 &
for t in base cursor flatall; do JITKERNELS_ROOT=ab/s34/$t/kernels python3 loader.py build linalg > $OUT/build_$t.log 2>&1 & done
wait
echo "builds $(( $(date +%s) - start )) s" >> $OUT/run.log
python3 ab/s34/kron_ab.py base=ab/s34/base/kernels cursor=ab/s34/cursor/kernels new=kernels \
  flatall=ab/s34/flatall/kernels > $OUT/kron_ab.log 2>&1
echo "ab exit $?" >> $OUT/run.log
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 250 tests/test_linalg.py 2>&1 | tail -2 >> $OUT/run.log
timeout 120 python3 -m pytest -q -p no:cacheprovider -p no:xdist --timeout 100 tests/test_large.py -k kron 2>&1 | tail -2 >> $OUT/run.log
