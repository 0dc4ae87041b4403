# Session 40 call 2 (same warm host as call 1): call 1's A/B again with the error reference fixed
# (call 1's script broadcast the batched eigenvalues wrongly and stopped before printing).
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
t0=$(date +%s)
JITKERNELS_ROOT=ab/s40/base/kernels python3 loader.py build linalg > $OUT/build_base.log 2>&1 &
python3 loader.py build linalg > $OUT/build_new.log 2>&1; wait
tail -qn1 $OUT/build_base.log $OUT/build_new.log | tee -a $OUT/run.log
timeout 300 python3 benchmarks/results/session40/scripts/ab_small_roots.py base=ab/s40/base/kernels new=kernels \
  --sizes 33,40,47,48,49,64 3 > $OUT/ab.log 2>&1
python3 -c "
import json
rows=[json.loads(l) for l in open('$OUT/ab.log') if l.startswith('{')]
d={(r['dtype'],r['n'],r['batch'],r['root']):r for r in rows}
for (dt,n,b,root),r in sorted(d.items()):
    if root=='base': print(dt,n,b,'base',r['median_us'],'new',d[(dt,n,b,'new')]['median_us'],'err',r['rel_err'],d[(dt,n,b,'new')]['rel_err'])
" | tee -a $OUT/run.log
tail -3 $OUT/ab.log | grep -v "^{" | tee -a $OUT/run.log
echo "done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
