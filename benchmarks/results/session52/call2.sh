# Session 52, call 2: failed_capture_probe.py three times (what a failed capture leaves in the allocator and the
# generator); the sampling build is cached from call 1 only if the machine is still warm, and the probe needs none.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
for i in 1 2 3; do echo "== run $i"; timeout 60 python3 benchmarks/results/session52/failed_capture_probe.py 2>&1 | grep -v "^  "; done > $OUT/probe.log
cat $OUT/probe.log
