# Session 51, call 3: call 2's one failure (test_determinism, graph replay of normal_bf16 after manual_seed): the
# test's sequence 40 times per op, ours and torch.randn, with and without a sync after each replay; then the bars.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" OUT=$OUT timeout 120 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 150 python3 benchmarks/results/session51/graph_seed_probe.py 2>&1 | tee $OUT/graph_seed_probe.log
timeout 300 python3 benchmarks/run.py --out $OUT --families sampling ebm diffusion --match "normal n=65536 d=5000" "cem_update" "_energy B=2097152" "ddpm_step 256" > $OUT/bench.log 2>&1
grep "^|" $OUT/bench.log | head -40
