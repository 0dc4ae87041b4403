# Session 37 call 1: where a warm load of fused goes on the GPU host, piece by piece (ab/s37 scripts).
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONPATH=$PWD JK_REPO=$PWD
unset PYTHONDONTWRITEBYTECODE
log=$OUT/run.log
{ echo "tree: $(cat commit.txt)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch,sys;print(torch.__version__, torch.version.cuda, sys.version.split()[0])"; lscpu | grep "Model name"; echo "PATH=$PATH"; } > $log
t0=$(date +%s)
python3 loader.py build fused 2>&1 | tail -2 >> $log
python3 tools/load_stages.py > /dev/null   # writes the bytecode caches
for i in 1 2 3 4 5 6 7 8; do python3 tools/load_stages.py; done >> $log 2>&1
for i in 1 2 3 4 5 6 7 8; do python3 ab/s37/pieces.py; done >> $log 2>&1
for i in 1 2 3 4 5 6; do python3 ab/s37/imp.py; done >> $log 2>&1
for i in 1 2 3 4; do python3 ab/s37/exec_lines.py; done >> $log 2>&1
LD_DEBUG=statistics python3 -c "
import torch, sys; torch.zeros(1, device='cuda'); sys.path.insert(0, '.'); import loader
spec = loader._Spec('fused', loader.kernels_root(None)); print('LIBRARY', spec.library, file=sys.stderr)
import time; t = time.perf_counter(); torch.ops.load_library(str(spec.library)); print('dlopen ms', 1e3 * (time.perf_counter() - t), file=sys.stderr)
" 2> $OUT/ld_stats.log; grep -A12 LIBRARY $OUT/ld_stats.log | head -30 >> $log
readelf -d $(python3 -c "import sys; sys.path.insert(0,'.'); import loader; print(loader._Spec('fused', loader.kernels_root(None)).library)") | grep NEEDED >> $log
echo "done: $(( $(date +%s) - t0 )) s" >> $log
cat $log
