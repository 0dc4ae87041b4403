# Session 29 call 3: light_ab.py (same-process A/B, new build against ab/base's), then fused.cu, sampling.cu and
# ebm_chains.cpp compiled alone three times each, base and new alternating (call 2 had one sample each).
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jkc_ab
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 -c "import loader; loader.prebuild()" > /dev/null 2>&1
timeout 420 python3 benchmarks/results/session29/light_ab.py 2>&1 | grep -v Warning | tee -a $OUT/run.log
REPO=$PWD
NINJA=$(ls -d $JITKERNELS_CACHE/fused/objects-*/build.ninja | head -1)
CF=$(grep -E "^cuda_cflags" $NINJA | sed 's/^cuda_cflags = //; s@-I[^ ]*kernels/common@@')
CXX=$(grep -E "^cxx = " $NINJA | sed 's/^cxx = //'); CXXF=$(grep -E "^cflags" $NINJA | sed 's/^cflags = //; s@-I[^ ]*kernels/common@@')
for round in 1 2 3; do
  for f in kernels/fused/fused.cu kernels/sampling/sampling.cu kernels/ebm/ebm_chains.cpp; do
    for tree in ab/base .; do
      name=$([ $tree = . ] && echo new || echo base)
      t0=$(date +%s%N)
      if [ ${f##*.} = cu ]; then
        eval nvcc $CF -I$REPO/$tree/kernels/common -I$REPO/$tree/$(dirname $f) -c $REPO/$tree/$f -o /tmp/x.o > /tmp/err.txt 2>&1; rc=$?
      else
        eval $CXX $CXXF -I$REPO/$tree/kernels/common -I$REPO/$tree/$(dirname $f) -c $REPO/$tree/$f -o /tmp/x.o > /tmp/err.txt 2>&1; rc=$?
      fi
      echo "round $round $f $name: $(( ($(date +%s%N) - t0) / 1000000 )) ms (rc $rc)" | tee -a $OUT/run.log
    done
  done
done
