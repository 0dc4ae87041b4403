# Session 49, call 2: why the cluster kernel (call 1) takes 30-42 us: Nsight Compute on it at n = 4096
# (cem_iteration) and n = 65536 (the bar row): warp states, and the stall samples per SASS instruction.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" OUT=$OUT timeout 100 bash tools/gpu_check.sh
rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
for pattern in "sampling cem_iteration" "sampling cem_update elite=6554"; do
  echo "== ncu: $pattern"
  timeout 120 ncu --clock-control none --kernel-name-base demangled -k "regex:elite_select_cluster" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
    python3 tools/profile_ops.py --ours-only --calls 1 "$pattern" 2>&1 | grep -v "^==PROF==\|jitkernels\|Warning\|warn_once"
done 2>&1 | tee $OUT/ncu.log
timeout 120 ncu --clock-control none --kernel-name-base demangled -k "regex:elite_select_cluster" --launch-skip 2 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --page source --print-source sass --csv \
  python3 tools/profile_ops.py --ours-only --calls 1 "sampling cem_iteration" > $OUT/ncu_source.csv 2>&1
gzip -f $OUT/ncu_source.csv
