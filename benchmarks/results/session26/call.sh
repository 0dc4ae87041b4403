# Session 26's GPU call: every family built on an empty cache (this tree, then the three families whose
# CUDA files changed as they were at the session's start, for the compile times), per-file compile
# times from ninja's logs, then the whole test suite.
set -u
export JITKERNELS_CACHE=$PWD/build/jkcache PYTHONUNBUFFERED=1 MAX_JOBS=16
cp commit.txt $OUT/ 2>/dev/null
t0=$(date +%s)
compile_times() {  # ninja's log: end - start (ms) of each object, per family
  for log in $(find "$1" -name .ninja_log | sort); do
    awk -v dir="$(basename $(dirname $(dirname $log)))" 'NR > 1 && $4 ~ /\.o$/ {printf "  %-10s %-28s %6.1f s\n", dir, $4, ($2 - $1) / 1000}' "$log"
  done
}
if [ "${SKIP_BUILD:-0}" = 0 ]; then
  python3 -c "import loader; loader.prebuild()" > $OUT/build.log 2>&1
  echo "build, every family side by side: $(( $(date +%s) - t0 )) s"; compile_times "$JITKERNELS_CACHE" | tee $OUT/compile_times.log
  t1=$(date +%s)
  JITKERNELS_CACHE=$PWD/build/jkold python3 -c "import loader; loader.prebuild(['diffusion', 'linalg', 'sampling'], root='ab/s26old/kernels')" > /dev/null 2>&1
  echo "old diffusion+linalg+sampling side by side: $(( $(date +%s) - t1 )) s"; compile_times build/jkold | tee -a $OUT/compile_times.log
fi
python3 -c "import loader; loader.prebuild()" >> $OUT/build.log 2>&1  # the families not built yet
if grep -q failed $OUT/build.log; then cat $OUT/build.log; python3 loader.py build 2>&1 | tail -5; exit 1; fi  # no tests then
t2=$(date +%s)
timeout ${PYTEST_S:-420} python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 300 -m "not large" ${PYTEST_ARGS:-} > $OUT/pytest.log 2>&1
tail -3 $OUT/pytest.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -20
echo "pytest: $(( $(date +%s) - t2 )) s; all: $(( $(date +%s) - t0 )) s"
