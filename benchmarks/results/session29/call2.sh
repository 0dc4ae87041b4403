# Session 29 call 2: the light .cu headers against the tree before them (ab/base: loader.py, loader_build.py
# and kernels/ of 89db91b). (1) every family built side by side on an empty cache (loader.prebuild, what
# quickstart and conftest do), base / new / base / new; (2) each .cu file alone through nvcc with the
# build's flags, base then new, one at a time. (bc is not on the GPU machine: the first run of this
# call printed no times; its prebuild logs have them. ROUNDS="" skips the prebuilds.)
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])" >> $OUT/run.log
REPO=$PWD
for round in ${ROUNDS-1 2}; do
  for tree in ab/base .; do
    name=$([ $tree = . ] && echo new || echo base)
    export JITKERNELS_CACHE=/tmp/jkc_${name}_$round
    t0=$(date +%s%N)
    (cd $tree && python3 -c "import loader; loader.prebuild()") > $OUT/prebuild_${name}_$round.log 2>&1
    echo "prebuild $name round $round: $(( ($(date +%s%N) - t0) / 1000000 )) ms; $(grep -c -i error $OUT/prebuild_${name}_$round.log) error lines" | tee -a $OUT/run.log
  done
done
ls -d /tmp/jkc_new_1/fused/objects-* > /dev/null 2>&1 || JITKERNELS_CACHE=/tmp/jkc_new_1 python3 loader.py build fused > /dev/null 2>&1
CF=$(grep -E "^cuda_cflags" $(ls -d /tmp/jkc_new_1/fused/objects-*/build.ninja | head -1) | sed 's/^cuda_cflags = //; s@-I[^ ]*kernels/common@@')
for f in $(cd $REPO && ls kernels/*/*.cu); do
  for tree in ab/base .; do
    name=$([ $tree = . ] && echo new || echo base)
    [ -f $REPO/$tree/$f ] || continue
    t0=$(date +%s%N)
    eval nvcc $CF -I$REPO/$tree/kernels/common -I$REPO/$tree/$(dirname $f) -c $REPO/$tree/$f -o /tmp/x.o > /tmp/err.txt 2>&1; rc=$?
    echo "nvcc $f $name: $(( ($(date +%s%N) - t0) / 1000000 )) ms (rc $rc)" | tee -a $OUT/run.log
  done
done
# (3) each .cpp file alone through the C++ compiler with the build's flags (the .cpp now includes cuda_host.h).
NINJA=$(ls -d /tmp/jkc_new_1/fused/objects-*/build.ninja | head -1)
CXX=$(grep -E "^cxx = " $NINJA | sed 's/^cxx = //'); CXXF=$(grep -E "^cflags" $NINJA | sed 's/^cflags = //; s@-I[^ ]*kernels/common@@')
for f in $(cd $REPO && ls kernels/*/*.cpp); do
  for tree in ab/base .; do
    name=$([ $tree = . ] && echo new || echo base)
    t0=$(date +%s%N)
    eval $CXX $CXXF -I$REPO/$tree/kernels/common -I$REPO/$tree/$(dirname $f) -c $REPO/$tree/$f -o /tmp/x.o > /tmp/err.txt 2>&1; rc=$?
    echo "c++ $f $name: $(( ($(date +%s%N) - t0) / 1000000 )) ms (rc $rc)" | tee -a $OUT/run.log
  done
done
