# Session 41 call 2: ebm's first build, before (d35a088: ebm_langevin.cu also compiled the float64 chain
# kernels) and after (936bdfb: an extern template declaration), each alone on an empty cache, in turn;
# then ebm's chain tests and the loader's review tests on HEAD, and load_time.py (#2) with session 40's
# loader (ops.py's code cached per build key).
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
for round in 1 2; do
  for label in base head; do
    root=kernels; [ $label = base ] && root=ab/s41/base/kernels
    cache=/tmp/jkc-$label-$round; rm -rf $cache
    /usr/bin/time -f "$label round $round: %e s wall" env JITKERNELS_CACHE=$cache JITKERNELS_ROOT=$root \
      python3 loader.py build ebm 2>&1 | tail -2 | cut -c1-400 >> $OUT/run.log
  done
done
export JITKERNELS_CACHE=/tmp/jitkernels-cache
python3 loader.py build > $OUT/build.log 2>&1
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_ebm.py -k "chain or langevin or hmc" 2>&1 \
  | tail -2 >> $OUT/run.log
timeout 120 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_loader_review.py 2>&1 | tail -2 >> $OUT/run.log
timeout 200 python3 benchmarks/load_time.py --out $OUT/load_time.json > $OUT/load_time.log 2>&1
tail -6 $OUT/load_time.log >> $OUT/run.log
cat $OUT/run.log
