# Session 27 call 2: a first run on an empty cache (benchmarks/first_run.py: side by side, then in turn),
# per-object compile times of a build of every family, then the whole GPU test suite.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16
echo "tree: $(cat commit.txt)" > $OUT/run.log
t0=$(date +%s)
timeout 300 python3 benchmarks/first_run.py --out $OUT/first_run.json 2>&1 | tail -4 | tee -a $OUT/run.log
export JITKERNELS_CACHE=$PWD/build/jkcache
t1=$(date +%s); python3 loader.py build ebm > $OUT/build.log 2>&1; echo "ebm alone: $(( $(date +%s) - t1 )) s" | tee -a $OUT/run.log
python3 -c "import loader; loader.prebuild()" >> $OUT/build.log 2>&1
for log in $(find build/jkcache -name .ninja_log | sort); do
  awk -v dir="$(basename $(dirname $(dirname $log)))" 'NR > 1 && $4 ~ /\.o$/ {printf "  %-10s %-28s %6.1f s\n", dir, $4, ($2 - $1) / 1000}' "$log"
done | tee $OUT/compile_times.log
if grep -q failed $OUT/build.log; then cat $OUT/build.log; exit 1; fi
t2=$(date +%s)
timeout ${PYTEST_S:-420} python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 300 -m "not large" > $OUT/pytest.log 2>&1
tail -3 $OUT/pytest.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -20
echo "pytest: $(( $(date +%s) - t2 )) s; all: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
