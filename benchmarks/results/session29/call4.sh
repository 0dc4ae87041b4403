# Session 29 call 4, the final tree: the .cpp files whose build got cuda_host.h, compiled alone twice, base and new
# alternating; then every family built side by side on an empty cache and the whole GPU suite.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=$PWD/build/jkcache
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])" >> $OUT/run.log
REPO=$PWD
JITKERNELS_CACHE=/tmp/jkc_flags python3 loader.py build fused > /dev/null 2>&1
NINJA=$(ls -d /tmp/jkc_flags/fused/objects-*/build.ninja | head -1)
CXX=$(grep -E "^cxx = " $NINJA | sed 's/^cxx = //'); CXXF=$(grep -E "^cflags" $NINJA | sed 's/^cflags = //; s@-I[^ ]*kernels/common@@')
for round in 1 2; do
  for f in kernels/ebm/ebm_chains.cpp kernels/ebm/ebm.cpp kernels/fused/fused.cpp; do
    for tree in ab/base .; do
      name=$([ $tree = . ] && echo new || echo base)
      t0=$(date +%s%N)
      eval $CXX $CXXF -I$REPO/$tree/kernels/common -I$REPO/$tree/$(dirname $f) -c $REPO/$tree/$f -o /tmp/x.o > /tmp/err.txt 2>&1; rc=$?
      echo "round $round $f $name: $(( ($(date +%s%N) - t0) / 1000000 )) ms (rc $rc)" | tee -a $OUT/run.log
    done
  done
done
t0=$(date +%s)
python3 -c "import loader; loader.prebuild()" > $OUT/build.log 2>&1
echo "build, every family side by side: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
cat $OUT/build.log >> $OUT/run.log
timeout 420 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 300 -m "not large" > $OUT/pytest.log 2>&1
tail -2 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -30 | tee -a $OUT/run.log
gzip -f $OUT/pytest.log
echo "suite done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
