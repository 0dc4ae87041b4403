# Session 37 call 6 (the final tree, with the CUDA_HOME/CUDA_PATH key change): load_time.py once more on
# whatever host comes, then the loader's key tests and a CUDA load of fused under the new key.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
log=$OUT/run.log
echo "tree: $(cat commit.txt)" > $log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $log
t0=$(date +%s)
timeout 300 python3 benchmarks/load_time.py --out $OUT/load_time.json 2>&1 | tail -8 >> $log
echo "load_time done: $(( $(date +%s) - t0 )) s" >> $log
echo "CUDA_HOME=${CUDA_HOME:-unset} CUDA_PATH=${CUDA_PATH:-unset}" >> $log
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_loader.py -k "key or toolkit or vector_flags or warm" >> $log 2>&1
python3 -c "
import torch, loader
f = loader.load('fused'); x = torch.randn(1000, device='cuda'); y = torch.randn(1000, device='cuda')
print('fused', f.cuda, 'key', f.key[:12], 'max err', (f.relu_add(x, y, 0.5) - (x.relu() + y + 0.5)).abs().max().item())" >> $log 2>&1
echo "done: $(( $(date +%s) - t0 )) s" >> $log
cat $log
