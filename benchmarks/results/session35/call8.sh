# Session 35 call 8: the final tree's tests for every family with CPU 16-bit changes (both devices, torch 2.11),
# then ebm's CPU rows A/B (before: ab/s35/rowsbase, kernels/ at 35ac663) on this host's Xeon.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONPATH=$PWD
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])" >> $OUT/run.log
t0=$(date +%s)
python3 loader.py build fused ebm diffusion sampling linalg > $OUT/build.log 2>&1 &
JITKERNELS_CUDA=0 python3 loader.py build ebm >> $OUT/build.log 2>&1 &
JITKERNELS_CUDA=0 JITKERNELS_ROOT=ab/s35/rowsbase/kernels python3 loader.py build ebm >> $OUT/build.log 2>&1 &
wait
echo "builds: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 330 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 300 tests/test_fused.py tests/test_ebm.py tests/test_diffusion.py tests/test_sampling.py tests/test_linalg.py > $OUT/pytest.log 2>&1
tail -1 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head | tee -a $OUT/run.log
gzip -f $OUT/pytest.log
JITKERNELS_CUDA=0 CUDA_VISIBLE_DEVICES= timeout 200 python3 benchmarks/results/session35/rows16_ab.py 1 2>&1 | grep -v "^\[jitkernels\]" > $OUT/rows16_ab_host.log
cat $OUT/rows16_ab_host.log | tee -a $OUT/run.log
echo "done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
