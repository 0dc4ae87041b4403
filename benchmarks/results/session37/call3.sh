# Session 37 call 3: warm load of fused, before (ab/s37/base: b712b79's loader and kernels) and after
# the dispatcher-library change, alternating fresh processes (tools/load_stages.py of each tree; both
# load the same cached build); then benchmarks/load_time.py on this tree.
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
log=$OUT/run.log
echo "tree: $(cat commit.txt)" > $log
t0=$(date +%s)
python3 loader.py build fused 2>&1 | tail -1 >> $log
python3 ab/s37/base/tools/load_stages.py > /dev/null; python3 tools/load_stages.py > /dev/null  # bytecode caches
for i in $(seq 16); do
  echo "base $(python3 ab/s37/base/tools/load_stages.py)"; echo "new  $(python3 tools/load_stages.py)"
done >> $log 2>&1
python3 - >> $log <<'PY'
import re, statistics, sys
rows = {"base": [], "new": []}
for line in open(sys.argv[1] if len(sys.argv) > 1 else "/dev/stdin" if False else __import__("os").environ["OUT"] + "/run.log"):
    m = re.match(r"(base|new)\s+fused: import ([\d.]+) key ([\d.]+) manifest ([\d.]+) dlopen ([\d.]+) bind ([\d.]+) total ([\d.]+)", line)
    if m:
        rows[m.group(1)].append([float(x) for x in m.groups()[1:]])
for tree, r in rows.items():
    cols = list(zip(*r))
    print(tree, "medians: import %.2f key %.2f manifest %.2f dlopen %.2f bind %.2f total %.2f ms" % tuple(statistics.median(c) for c in cols),
          "| min total %.2f" % min(cols[-1]))
PY
timeout 480 python3 benchmarks/load_time.py --out $OUT/load_time.json 2>&1 | tail -8 >> $log
echo "done: $(( $(date +%s) - t0 )) s" >> $log
cat $log
