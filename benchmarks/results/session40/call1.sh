# Session 40 call 1: small_product's 6 x 2 tile for 32 < n <= 48 (was the 8 x 2 tile), against HEAD's
# kernels in one process, alternating rounds; then linalg's small-route tests; then load_time.py (#2).
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])" >> $OUT/run.log
t0=$(date +%s)
JITKERNELS_ROOT=ab/s40/base/kernels python3 loader.py build linalg > $OUT/build_base.log 2>&1 &
python3 loader.py build linalg > $OUT/build_new.log 2>&1; wait
tail -qn1 $OUT/build_base.log $OUT/build_new.log | tee -a $OUT/run.log
echo "builds: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 200 python3 benchmarks/results/session40/scripts/ab_small_roots.py base=ab/s40/base/kernels new=kernels \
  --sizes 33,40,47,48,49,64 3 > $OUT/ab.log 2>&1
python3 -c "
import json
rows=[json.loads(l) for l in open('$OUT/ab.log') if l.startswith('{')]
d={(r['dtype'],r['n'],r['batch'],r['root']):r for r in rows}
for (dt,n,b,root),r in sorted(d.items()):
    if root=='base': print(dt,n,b,'base',r['median_us'],'new',d[(dt,n,b,'new')]['median_us'],'err',r['rel_err'],d[(dt,n,b,'new')]['rel_err'])
" | tee -a $OUT/run.log
tail -3 $OUT/ab.log | grep -v "^{" | tee -a $OUT/run.log
echo "ab: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 100 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 80 tests/test_linalg.py -k "small or diagonal or identity" 2>&1 | tail -3 | tee -a $OUT/run.log
echo "tests: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 240 python3 benchmarks/load_time.py --out $OUT/load_time.json > $OUT/load_time.log 2>&1; tail -8 $OUT/load_time.log | tee -a $OUT/run.log
echo "done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
