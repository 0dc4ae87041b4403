# Session 41 call 4: a first run's build of every family side by side (loader.prebuild, then load; what
# quickstart does), each on an empty cache, before (d35a088) and after (HEAD: ebm_langevin.cu without the
# float64 kernels) in alternating rounds. Then the README's "Adding a family" family built and run with
# its CUDA half (tests/test_walkthrough.py) and cem_minimize's new checks on the GPU.
set -u
export PYTHONUNBUFFERED=1
unset PYTHONDONTWRITEBYTECODE MAX_JOBS
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
for round in 1 2; do
  for label in base head; do
    root=$PWD/kernels; [ $label = base ] && root=$PWD/ab/s41/base/kernels
    cache=/tmp/jkc-first-$label-$round; rm -rf $cache
    JITKERNELS_CACHE=$cache JITKERNELS_ROOT=$root python3 -c "
import time, torch, loader
start = time.perf_counter(); loader.prebuild(); built = time.perf_counter() - start
for name in loader.families(): loader.load(name)
print('$label round $round: every family side by side %.1f s (prebuild %.1f s)' % (time.perf_counter() - start, built))
" 2>&1 | grep -v "^\[jitkernels\]" >> $OUT/run.log
  done
done
export JITKERNELS_CACHE=/tmp/jitkernels-cache
python3 loader.py build > $OUT/build.log 2>&1
timeout 240 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_walkthrough.py tests/test_sampling.py -k "walkthrough or readme or help or honestly or cem_minimize" 2>&1 | tail -2 >> $OUT/run.log
cat $OUT/run.log
