# Session 32 call 4: the chains' grid (grid_probe.py on ab/s32/grid, carried: this tree's kernels with
# launchers that read JK_CHAIN_GRID), and chain_probe.py on this tree (16-bit mma for scores only).
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=$PWD/build/jkcache PYTHONPATH=$PWD
P=benchmarks/results/session32
echo "tree: $(cat commit.txt) + uncommitted ebm edits" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
python3 -c "import loader; loader.prebuild(['ebm'])" > $OUT/build.log 2>&1 &
python3 -c "import loader; loader.prebuild(['ebm'], root='ab/s32/grid/kernels')" > $OUT/build_grid.log 2>&1
wait
echo "builds: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 300 python3 $P/grid_probe.py ab/s32/grid/kernels 2>&1 | tee -a $OUT/run.log
timeout 200 python3 $P/chain_probe.py 2>&1 | tail -3 | tee -a $OUT/run.log
echo "all done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
