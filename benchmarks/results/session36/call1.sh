# Session 36 call 1: f335656's CPU mends (ebm rows' to_opmath, conv1d_gn_mish's one CPU pass) on the GPU host:
# ebm and diffusion tests on both devices (torch 2.11); then fused's warm-load stages and /proc/cpuinfo's cost.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONPATH=$PWD
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])" >> $OUT/run.log
nproc >> $OUT/run.log
t0=$(date +%s)
python3 loader.py build fused ebm diffusion > $OUT/build.log 2>&1
echo "builds: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 360 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 300 tests/test_ebm.py tests/test_diffusion.py > $OUT/pytest.log 2>&1
tail -1 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head | tee -a $OUT/run.log
gzip -f $OUT/pytest.log
for i in $(seq 12); do python3 tools/load_stages.py fused; done 2>&1 | tee $OUT/load_stages.log | tail -12 >> $OUT/run.log
python3 -c "
import time
ts = []
for i in range(20):
    t = time.perf_counter()
    with open('/proc/cpuinfo') as f:
        for line in f:
            if line.startswith('flags'): break
    ts.append((time.perf_counter() - t) * 1e3)
print('cpuinfo first-flags read ms: first %.3f min %.3f median %.3f' % (ts[0], min(ts), sorted(ts)[10]))
" | tee -a $OUT/run.log
echo "done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
