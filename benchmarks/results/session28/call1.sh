# Session 28 call 1: every family side by side on an empty cache (prebuild's new start order), the whole
# GPU suite, then nvcc --time of ebm.cu against its headers alone and a light header set.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=$PWD/build/jkcache
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
python3 -c "import loader; loader.prebuild()" > $OUT/build.log 2>&1
echo "build, every family side by side: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
cat $OUT/build.log >> $OUT/run.log
timeout 470 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 300 -m "not large" > $OUT/pytest.log 2>&1
tail -2 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -20 | tee -a $OUT/run.log
gzip -f $OUT/pytest.log
echo "suite done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
ninja=$(ls -d $JITKERNELS_CACHE/ebm/objects-*/build.ninja | head -1)
CF=$(grep -E "^cuda_cflags" $ninja | sed 's/^cuda_cflags = //')
mkdir -p /tmp/hdr && cd /tmp/hdr
printf '#include <ATen/Dispatch.h>\n#include <ATen/OpMathType.h>\n#include "dependent_launch.cuh"\n#include "ebm.h"\n#include "ebm_rows.cuh"\n#include "elementwise.cuh"\n#include "philox_cuda.cuh"\n' > ebm_headers.cu
printf '#include <ATen/cuda/PhiloxUtils.cuh>\n#include <c10/util/BFloat16.h>\n#include <c10/util/Half.h>\n' > light_headers.cu
printf '\n' > empty.cu
for f in $OLDPWD/kernels/ebm/ebm.cu ebm_headers.cu light_headers.cu empty.cu; do
  rm -f t.csv; eval nvcc $CF -I$OLDPWD/kernels/ebm -c $f -o x.o --time t.csv > /dev/null 2>&1
  awk -F' , ' -v f=$(basename $f) 'NR>1 && $7 != "" {s+=$7; p=p sprintf(" %s %.1f", $2, $7/1000)} END {printf "nvcc --time %s: %.1f s (%s)\n", f, s/1000, p}' t.csv | tee -a $OUT/run.log
done
