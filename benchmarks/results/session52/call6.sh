# Session 52, call 6: draws_during_capture_probe.py (another thread's draws while cem_minimize(cuda_graph=True) captures).
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" FAMILIES="sampling" OUT=$OUT timeout 150 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 200 python3 benchmarks/results/session52/draws_during_capture_probe.py > $OUT/probe.log 2>&1; tail -5 $OUT/probe.log
