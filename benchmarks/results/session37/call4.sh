# Session 37 call 4: warm load of fused, b712b79 (ab/s37/base) against this tree, alternating fresh
# processes, each tree with its own cache (so neither rewrites the other's sources memo); dlopen split
# into map+relocate and static initializers (ab/s37/probe: fused and an empty library with a
# constructor that stamps the clock); whether torch 2.11 imports numpy; then benchmarks/load_time.py.
export PYTHONUNBUFFERED=1 MAX_JOBS=16
unset PYTHONDONTWRITEBYTECODE
log=$OUT/run.log
echo "tree: $(cat commit.txt)" > $log
t0=$(date +%s)
python3 -c "import torch, sys; print('numpy imported by torch:', 'numpy' in sys.modules, sys.modules['numpy'].__version__ if 'numpy' in sys.modules else '')" >> $log
python3 -c "import sys; sys.path.insert(0, '.'); import loader; print('flags numpy', loader._host_vector_flags(), 'cpuinfo', loader._host_vector_flags('/proc/cpuinfo'))" >> $log
JITKERNELS_CACHE=/tmp/jk-base python3 ab/s37/base/loader.py build fused 2>&1 | tail -1 >> $log &
JITKERNELS_CACHE=/tmp/jk-new python3 loader.py build fused 2>&1 | tail -1 >> $log &
JITKERNELS_CACHE=/tmp/jk-probe python3 loader.py --root ab/s37/probe build fused empty 2>&1 | tail -2 >> $log &
wait
JITKERNELS_CACHE=/tmp/jk-base python3 ab/s37/base/tools/load_stages.py > /dev/null
JITKERNELS_CACHE=/tmp/jk-new python3 tools/load_stages.py > /dev/null
for i in $(seq 16); do
  echo "base $(JITKERNELS_CACHE=/tmp/jk-base python3 ab/s37/base/tools/load_stages.py)"
  echo "new  $(JITKERNELS_CACHE=/tmp/jk-new python3 tools/load_stages.py)"
done >> $log 2>&1
python3 ab/s37/summarize_stages.py $log >> $log
for f in fused empty; do
  lib=$(JITKERNELS_CACHE=/tmp/jk-probe python3 -c "import sys; sys.path.insert(0, '.'); import loader; from pathlib import Path; print(loader._Spec('$f', Path('ab/s37/probe').absolute()).library)")
  for i in 1 2 3 4 5 6; do JITKERNELS_CACHE=/tmp/jk-probe python3 ab/s37/probe_dl.py $lib; done
done >> $log 2>&1
export JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 420 python3 benchmarks/load_time.py --out $OUT/load_time.json 2>&1 | tail -8 >> $log
echo "done: $(( $(date +%s) - t0 )) s" >> $log
cat $log
