# Session 36 call 7: is the AVX-512 bfloat16 relu_add at one thread slower than session 35's (calls 2, 3 and 6
# read 0.84-0.95x for that first case)? relu16_order.py on this host's Xeon, with the instructions compared.
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONPATH=$PWD
echo "tree: $(cat commit.txt)" > $OUT/run.log
(JITKERNELS_CUDA=0 python3 loader.py build fused & JITKERNELS_CUDA=0 JITKERNELS_ROOT=ab/s36/base512/kernels python3 loader.py build fused & wait) > /dev/null 2>&1
CUDA_VISIBLE_DEVICES= JITKERNELS_CUDA=0 python3 benchmarks/results/session36/relu16_order.py 2>&1 | grep -v "^\[jitkernels\]" | tee -a $OUT/run.log
CUDA_VISIBLE_DEVICES= JITKERNELS_CUDA=0 python3 benchmarks/results/session36/relu16_order.py 2>&1 | grep -v "^\[jitkernels\]" | tee -a $OUT/run.log
