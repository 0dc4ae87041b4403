# Session 29 call 6: prebuild's families at once on this 16-CPU host: 4 (its rule, one per 4 CPUs) against 5 (all
# of them; os.cpu_count patched to 20 in the parent only, so each build's ninja is unchanged), alternating,
# each on an empty cache. After the light .cu files the whole work is ~150 s of compiles, 16 files.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16
echo "tree: $(cat commit.txt)" > $OUT/run.log
for round in 1 2 3; do
  for cpus in 16 20; do
    export JITKERNELS_CACHE=/tmp/jkc_${cpus}_$round
    python3 -c "import os; os.cpu_count = lambda: $cpus; import loader; loader.prebuild()" > $OUT/prebuild_${cpus}_$round.log 2>&1
    echo "round $round, slots $(( cpus / 4 )): $(grep 'built after' $OUT/prebuild_${cpus}_$round.log | sed 's/\[jitkernels\] //' | tr '\n' ' ')" | tee -a $OUT/run.log
  done
done
