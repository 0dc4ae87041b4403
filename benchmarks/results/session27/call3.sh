# Session 27 call 3: ebm built alone on an empty cache, twice (a cache under /tmp, then one in the repo's
# build/ as call 2 did), with per-object times; then benchmarks/load_time.py (fused: warm loads, cold build).
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16
echo "tree: $(cat commit.txt)" > $OUT/run.log
times() {
  for log in $(find "$1" -name .ninja_log | sort); do
    awk -v dir="$(basename $(dirname $(dirname $log)))" 'NR > 1 && $4 ~ /\.o$/ {printf "  %-10s %-28s %6.1f s\n", dir, $4, ($2 - $1) / 1000}' "$log"
  done
}
for cache in /tmp/jk-ebm-1 $PWD/build/jk-ebm-2 /tmp/jk-ebm-3; do
  t=$(date +%s%N); JITKERNELS_CACHE=$cache python3 loader.py build ebm > /dev/null 2>&1
  echo "ebm alone, cache $cache: $(( ($(date +%s%N) - t) / 1000000 )) ms" | tee -a $OUT/run.log; times $cache | tee -a $OUT/run.log
done
timeout 400 python3 benchmarks/load_time.py --out $OUT/load_time.json 2>&1 | tail -8 | tee -a $OUT/run.log
