# Session 41 call 3: call 2's load_time.py read 3.15 ms for fused's warm load (session 40's call 7: 2.28 ms,
# on eb9c86d, before that session's loader changes). Same host, alternating fresh processes: eb9c86d's tree
# against HEAD's.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
(cd ab/s41/eb9c86d && JITKERNELS_CACHE=/tmp/jkc-warm-eb9c86d python3 loader.py build fused > /dev/null 2>&1) &
JITKERNELS_CACHE=/tmp/jkc-warm-head python3 loader.py build fused > /dev/null 2>&1; wait
for label in eb9c86d head; do JITKERNELS_CACHE=/tmp/jkc-warm-$label python3 -c "pass"; done
python3 benchmarks/results/session41/warm_ab.py eb9c86d=ab/s41/eb9c86d head=. 20 >> $OUT/run.log 2>&1
cat $OUT/run.log
