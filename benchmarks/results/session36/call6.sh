# Session 36 call 6: bfloat16's one-pass AVX2 loop (16 values a vector) built with the GPU image's compiler:
# fused's and ebm's tests on both devices, then the A/B on this host's Xeon in AVX2 and AVX-512 mode.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONPATH=$PWD
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])" >> $OUT/run.log
grep -m1 "model name" /proc/cpuinfo >> $OUT/run.log
t0=$(date +%s)
for f in fused ebm; do python3 loader.py build $f > $OUT/build_$f.log 2>&1 & done
JITKERNELS_CUDA=0 python3 loader.py build fused ebm > $OUT/build_cpu_only.log 2>&1 &
for r in base base512; do JITKERNELS_CUDA=0 JITKERNELS_ROOT=ab/s36/$r/kernels python3 loader.py build fused ebm > $OUT/build_ab_$r.log 2>&1 & done
wait
cat $OUT/build_*.log > $OUT/build.log; rm $OUT/build_*.log
echo "builds: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 280 tests/test_fused.py tests/test_ebm.py > $OUT/pytest.log 2>&1
tail -1 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head | tee -a $OUT/run.log
gzip -f $OUT/pytest.log
for mode in avx2 avx512; do
  CUDA_VISIBLE_DEVICES= JITKERNELS_CUDA=0 timeout 200 python3 benchmarks/results/session36/cpu16_ab.py $mode 1 16 2>&1 \
    | grep -v "^\[jitkernels\]\|^W1" > $OUT/cpu16_ab_host_$mode.log
done
echo "done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
