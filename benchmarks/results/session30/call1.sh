# Session 30 call 1: every family built side by side on an empty cache, the warm load of fused split
# finely (load_probe.py, fresh processes), then the whole GPU suite on the session's starting tree.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=$PWD/build/jkcache
unset PYTHONDONTWRITEBYTECODE  # as a user's process: bytecode cached (load_time.py does the same)
P=benchmarks/results/session30
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])" >> $OUT/run.log
t0=$(date +%s)
python3 -c "import loader; loader.prebuild()" > $OUT/build.log 2>&1
echo "build, every family side by side: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
cat $OUT/build.log >> $OUT/run.log
python3 $P/load_probe.py fused > /dev/null  # writes the bytecode caches
for i in 1 2 3 4 5 6 7 8; do python3 $P/load_probe.py fused; python3 $P/load_probe.py fused --ctypes; done > $OUT/probe.log 2>&1
for i in 1 2 3 4 5 6 7 8; do python3 tools/load_stages.py fused; done > $OUT/stages.log 2>&1
python3 -X importtime -c "import torch; torch.zeros(1, device='cuda'); import loader" 2>&1 | tail -3 >> $OUT/stages.log
echo "PATH=$PATH" >> $OUT/stages.log
python3 -c "import time; t=time.perf_counter(); d=open('/proc/cpuinfo').read(); print('cpuinfo whole', len(d), 'bytes', round((time.perf_counter()-t)*1e3, 3), 'ms')" >> $OUT/stages.log
tail -4 $OUT/probe.log >> $OUT/run.log; tail -12 $OUT/stages.log >> $OUT/run.log
timeout 480 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 300 -m "not large" > $OUT/pytest.log 2>&1
tail -2 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -30 | tee -a $OUT/run.log
gzip -f $OUT/pytest.log
echo "suite done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
