# Session 35 call 5: the final tree's fused and ebm tests (CPU halves with the AVX-512 16-bit loop, on this
# host's CPU and torch 2.11), then the 16-bit CPU loop A/B (before session 35 against now) on this host's CPU.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONPATH=$PWD
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])" >> $OUT/run.log
lscpu | grep -E "Model name|^CPU\(s\)" >> $OUT/run.log
grep -o -w "avx512f\|avx512bw\|avx512_bf16\|avx512fp16" /proc/cpuinfo | sort | uniq -c | tr '\n' ' ' >> $OUT/run.log; echo >> $OUT/run.log
t0=$(date +%s)
python3 loader.py build fused ebm > $OUT/build.log 2>&1 &
JITKERNELS_CUDA=0 python3 loader.py build fused ebm >> $OUT/build.log 2>&1 &
JITKERNELS_CUDA=0 JITKERNELS_ROOT=ab/s35/cpubase/kernels python3 loader.py build fused ebm >> $OUT/build.log 2>&1 &
wait
echo "builds: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 330 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 300 tests/test_fused.py tests/test_ebm.py > $OUT/pytest.log 2>&1
tail -1 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head | tee -a $OUT/run.log
JITKERNELS_CUDA=0 CUDA_VISIBLE_DEVICES= timeout 200 python3 benchmarks/results/session35/cpu16_ab.py 1 16 2>&1 | grep -v "^\[jitkernels\]\|^W1127" > $OUT/cpu16_ab_host.log
cat $OUT/cpu16_ab_host.log | tee -a $OUT/run.log
echo "done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
