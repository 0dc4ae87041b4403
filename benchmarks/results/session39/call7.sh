# Session 39 call 7: small_product's vector k loop unrolled by 2,
# against HEAD, one process, alternating rounds.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
t0=$(date +%s)
JITKERNELS_ROOT=ab/s39/base2/kernels python3 loader.py build linalg > $OUT/build_base.log 2>&1 &
python3 loader.py build linalg > $OUT/build_new.log 2>&1; wait
tail -qn1 $OUT/build_base.log $OUT/build_new.log
echo "builds: $(( $(date +%s) - t0 )) s"
timeout 150 python3 benchmarks/results/session39/scripts/ab_small_roots.py base=ab/s39/base2/kernels new=kernels 3 > $OUT/ab.log 2>&1
python3 -c "
import json
rows=[json.loads(l) for l in open('$OUT/ab.log') if l.startswith('{')]
d={(r['dtype'],r['n'],r['batch'],r['root']):r['median_us'] for r in rows}
for (dt,n,b,root),v in sorted(d.items()):
    if root=='base': print(dt,n,b,'base',v,'new',d[(dt,n,b,'new')])
"
timeout 60 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 50 tests/test_linalg.py -k "small or diagonal or identity" 2>&1 | tail -1
echo "done: $(( $(date +%s) - t0 )) s"
