#!/usr/bin/env bash
# ptx.sh TREE FAMILY OUT: the family's CUDA half as sm_90 PTX (nvcc, the torch headers of this machine),
# and OUT.norm without comments and with the file-hash in internal names masked, for diffing two trees.
# Session 13: sampling.cu and diffusion.cu give the same PTX before and after the session's header
# changes; ebm.cu's PTX changes with any edit of a header it includes (one blank line appended to
# fast_math.cuh: 9051 lines differ), so a diff there says nothing.
set -eu
TORCH_LIB=$(python3 -c "import torch, os; print(os.path.dirname(torch.__file__) + '/lib')")
nvcc -std=c++20 -O3 --expt-relaxed-constexpr -arch=sm_90 -ptx -I"$TORCH_LIB/../include" \
  -I"$TORCH_LIB/../include/torch/csrc/api/include" -I/usr/local/cuda/include -I"$1/kernels/common" -I"$1/kernels/$2" \
  -DJK_NAMESPACE=jk_x -DJK_WITH_CUDA -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ \
  -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ "$1/kernels/$2/$2.cu" -o "$3"
grep -v "^//" "$3" | sed -E "s/[0-9a-f]{8}_[0-9]+_${2}_cu_[0-9a-f]{8}/H/g" > "$3.norm"
