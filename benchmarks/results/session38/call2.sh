# Session 38 call 2: load_time.py on a quiet machine, the quickstart on both devices (timed), then the
# quickstart test beside other CPU tests (4 workers), as the whole suite runs it.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
python3 -c "import loader; loader.prebuild()" > $OUT/build.log 2>&1
echo "build: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 260 python3 benchmarks/load_time.py --out $OUT/load_time.json 2>&1 | tail -4 | tee -a $OUT/run.log
echo "load_time done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
for d in cuda cpu; do
  s=$(date +%s); timeout 150 python3 examples/quickstart.py --device $d > $OUT/quickstart_$d.log 2>&1
  echo "quickstart $d: rc $? in $(( $(date +%s) - s )) s" | tee -a $OUT/run.log
done
s=$(date +%s)
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 180 tests/test_examples.py tests/test_fused.py tests/test_sampling.py -k "cpu" > $OUT/pytest_contention.log 2>&1
tail -3 $OUT/pytest_contention.log | tee -a $OUT/run.log; echo "contention run: $(( $(date +%s) - s )) s" | tee -a $OUT/run.log
