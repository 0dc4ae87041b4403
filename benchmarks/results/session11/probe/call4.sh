#!/usr/bin/env bash
# session 11 call 4: why jk::cuda_elementwise launches fail in ebm ("invalid device function")
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
(STEPS="build" FAMILIES=ebm bash tools/gpu_check.sh > "$OUT/build.out" 2>&1) &
python3 scratch/probe.py 2>&1 | grep -v "^\[jitkernels\]" | tee "$OUT/probe.log"
wait; tail -2 "$OUT/build.out"
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
so=$(ls -t $JITKERNELS_CACHE/ebm/*/jk_ebm*.so | head -1)
{ echo "device elf kernels with SeparableScore: $($CO -elf "$so" | grep -o "\.text\._ZN2jk18elementwise[^ ]*" | sort -u | wc -l)"
  echo "registration strings: $(strings "$so" | grep -c "^_ZN2jk18elementwise_kernel")"
  $CO -lelf "$so" | head; $CO -elf "$so" | grep -o "\.text\._ZN2jk18elementwise[^ ]*" | sort -u | head -3
  for mode in EAGER LAZY; do echo "== CUDA_MODULE_LOADING=$mode"; CUDA_MODULE_LOADING=$mode CUDA_LAUNCH_BLOCKING=1 JK_AB_FLAT=1 timeout 60 python3 scratch/ab_flat.py 2>&1 | grep -v "^  " | tail -4; done
} 2>&1 | tee "$OUT/ebm_probe.log"
