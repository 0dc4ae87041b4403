# Session 36 call 3 (same warm H200 host as call 2, builds cached): call 2's A/B logs did not come back (only 8
# files do), so the A/B again: AVX-512 mode, AVX2 mode, AVX-512 mode, each at 1 and 16 threads.
export PYTHONUNBUFFERED=1 JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONPATH=$PWD
for mode in avx512 avx2 avx512; do
  CUDA_VISIBLE_DEVICES= JITKERNELS_CUDA=0 timeout 200 python3 benchmarks/results/session36/cpu16_ab.py $mode 1 16 2>&1 \
    | grep -v "^\[jitkernels\]\|^W1" >> $OUT/cpu16_ab_host_$mode.log
  echo "== $mode" >> $OUT/cpu16_ab_host_$mode.log
done
