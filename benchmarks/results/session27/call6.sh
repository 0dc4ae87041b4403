# Session 27 call 6: ebm with langevin_chain split by dtype: ebm alone on empty caches (twice), ebm's GPU
# tests, then benchmarks/first_run.py (side by side, in turn).
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16
echo "tree: $(cat commit.txt)" > $OUT/run.log
times() {
  for log in $(find "$1" -name .ninja_log | sort); do
    awk -v dir="$(basename $(dirname $(dirname $log)))" 'NR > 1 && $4 ~ /\.o$/ {printf "  %-10s %-28s %6.1f s\n", dir, $4, ($2 - $1) / 1000}' "$log"
  done
}
for cache in /tmp/jk-ebm-1 $PWD/build/jk-ebm-2; do
  t=$(date +%s%N); JITKERNELS_CACHE=$cache python3 loader.py build ebm > /dev/null 2>&1
  echo "ebm alone, cache $cache: $(( ($(date +%s%N) - t) / 1000000 )) ms" | tee -a $OUT/run.log; times $cache | tee -a $OUT/run.log
done
export JITKERNELS_CACHE=$PWD/build/jk-ebm-2
timeout 240 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 200 tests/test_ebm.py tests/test_determinism.py > $OUT/pytest.log 2>&1
tail -2 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head
timeout 280 python3 benchmarks/first_run.py --out $OUT/first_run.json 2>&1 | tail -3 | tee -a $OUT/run.log
