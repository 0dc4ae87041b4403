# Session 51, call 4: call 3's probe found no mismatch with an idle GPU; the same with the GPU kept behind the host.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" OUT=$OUT timeout 120 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 200 python3 benchmarks/results/session51/graph_seed_probe.py --busy --trials 10 2>&1 | tee $OUT/graph_seed_probe_busy.log
