# Session 34 call 1: kron in linear output order (scratch family ab/s34/kernels/kronlin) vs linalg's kron and
# torch.compile (ab/s34/kron_probe.py).
set -u
export PYTHONPATH=$PWD JITKERNELS_CACHE=/tmp/jitkernels-cache MAX_JOBS=16
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"
  echo "tree: $(cat commit.txt)"; } > $OUT/run.log 2>&1
start=$(date +%s)
python3 loader.py build linalg > $OUT/build_linalg.log 2>&1 &
JITKERNELS_ROOT=ab/s34/kernels python3 loader.py build kronlin > $OUT/build_kronlin.log 2>&1 &
wait
echo "builds $(( $(date +%s) - start )) s" >> $OUT/run.log
python3 ab/s34/kron_probe.py > $OUT/kron_probe.log 2>&1; echo "probe exit $?" >> $OUT/run.log
