# Session 28 call 2: nvcc --time on torch 2.11's headers: fused.cu (raw pointers, light headers), sampling.cu,
# and files of headers alone, each with its error output if it fails.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=$PWD/build/jkcache
echo "tree: $(cat commit.txt)" > $OUT/run.log
JITKERNELS_CUDA=1 python3 loader.py build sampling > /dev/null 2>&1
ninja=$(ls -d $JITKERNELS_CACHE/sampling/objects-*/build.ninja | head -1)
CF=$(grep -E "^cuda_cflags" $ninja | sed 's/^cuda_cflags = //')
REPO=$PWD; mkdir -p /tmp/hdr && cd /tmp/hdr
printf '\n' > empty.cu
printf '#include <c10/util/BFloat16.h>\n#include <c10/util/Half.h>\n' > half_bf16.cu
printf '#include <ATen/cuda/PhiloxCudaState.h>\n' > philox_state.cu
printf '#include <ATen/cuda/PhiloxUtils.cuh>\n' > philox_utils.cu
printf '#include <ATen/core/TensorBase.h>\n' > tensorbase.cu
printf '#include <ATen/Dispatch.h>\n#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n#include "dependent_launch.cuh"\n#include "elementwise.cuh"\n#include "philox_cuda.cuh"\n#include "reduce.cuh"\n#include "sampling.h"\n' > sampling_headers.cu
for f in empty.cu half_bf16.cu philox_state.cu philox_utils.cu tensorbase.cu sampling_headers.cu $REPO/kernels/sampling/sampling.cu $REPO/kernels/fused/fused.cu; do
  rm -f t.csv; eval nvcc $CF -I$REPO/kernels/sampling -I$REPO/kernels/fused -c $f -o x.o --time t.csv > err.txt 2>&1; rc=$?
  awk -F' , ' -v f=$(basename $f) -v rc=$rc 'NR>1 && $7 != "" {s+=$7; p=p sprintf(" %s %.1f", $2, $7/1000)} END {printf "nvcc --time %s (rc %d): %.1f s (%s)\n", f, rc, s/1000, p}' t.csv | tee -a $OUT/run.log
  [ $rc -ne 0 ] && head -5 err.txt | tee -a $OUT/run.log
done
