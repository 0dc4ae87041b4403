# Session 32 call 1: where langevin_chain's time goes at few steps (chain_probe.py), and Nsight Compute
# of the one-launch chain at B=2^21, n_steps=1 (Gaussian, D=16) and of bfloat16 gaussian_score.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=$PWD/build/jkcache PYTHONPATH=$PWD
P=benchmarks/results/session32
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
python3 -c "import loader; loader.prebuild(['ebm'])" > $OUT/build.log 2>&1
echo "build: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 200 python3 $P/chain_probe.py 2>&1 | tee -a $OUT/run.log
for pattern in "langevin_chain n_steps=1" "gaussian_score bfloat16"; do
  echo "== ncu: $pattern"
  timeout 150 ncu --clock-control none --kernel-name-base demangled -k "regex:(jk|ebm)::" \
    --launch-skip 3 --launch-count 1 --section SpeedOfLight --section LaunchStats --section Occupancy \
    --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section SourceCounters \
    python3 tools/profile_ops.py --ours-only --calls 1 "$pattern" 2>&1 | grep -v "^==PROF=="
done > $OUT/ncu.log 2>&1
echo "all done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
