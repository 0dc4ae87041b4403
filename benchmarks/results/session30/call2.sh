# Session 30 call 2: ebm's C++ half in four files (the CPU loops apart from the registration) against the tree
# before the split (ab/s30/base: loader.py, loader_build.py and kernels/ of 1bd107d). (1) each ebm .cpp alone
# through the C++ compiler with the build's flags; (2) every family built side by side on an empty cache
# (loader.prebuild), base / new, twice; (3) the whole GPU suite on the new tree.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])" >> $OUT/run.log
REPO=$PWD
for round in 1 2; do
  for tree in ab/s30/base .; do
    name=$([ $tree = . ] && echo new || echo base)
    export JITKERNELS_CACHE=/tmp/jkc_${name}_$round
    t0=$(date +%s%N)
    (cd $tree && python3 -c "import loader; loader.prebuild()") > $OUT/prebuild_${name}_$round.log 2>&1
    echo "prebuild $name round $round: $(( ($(date +%s%N) - t0) / 1000000 )) ms; $(grep 'built after' $OUT/prebuild_${name}_$round.log | sed 's/\[jitkernels\] //' | tr '\n' ' ')" | tee -a $OUT/run.log
  done
done
NINJA=$(ls -d /tmp/jkc_new_1/ebm/objects-*/build.ninja | head -1)
CXX=$(grep -E "^cxx = " $NINJA | sed 's/^cxx = //'); CXXF=$(grep -E "^cflags" $NINJA | sed 's/^cflags = //; s@-I[^ ]*kernels/common@@')
for f in $(cd $REPO && ls kernels/ebm/*.cpp ab/s30/base/kernels/ebm/*.cpp); do
  root=$( [ ${f#ab/} = $f ] && echo $REPO || echo $REPO/ab/s30/base ); rel=${f#ab/s30/base/}
  t0=$(date +%s%N)
  eval $CXX $CXXF -I$root/kernels/common -I$root/kernels/ebm -c $REPO/$f -o /tmp/x.o > /tmp/err.txt 2>&1; rc=$?
  echo "c++ $f: $(( ($(date +%s%N) - t0) / 1000000 )) ms (rc $rc)" | tee -a $OUT/run.log
done
export JITKERNELS_CACHE=/tmp/jkc_new_1
timeout 330 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 300 -m "not large" > $OUT/pytest.log 2>&1
tail -2 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -30 | tee -a $OUT/run.log
gzip -f $OUT/pytest.log
