# Session 35 call 7: the final tree's fused, ebm and diffusion tests (both devices; the CPU's half-type
# products through float32 where PyTorch's are slow, jk::cpu_products_fast) on a GPU host with torch 2.11.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONPATH=$PWD
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])" >> $OUT/run.log
t0=$(date +%s)
python3 loader.py build fused ebm diffusion > $OUT/build.log 2>&1
echo "builds: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
timeout 400 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 300 tests/test_fused.py tests/test_ebm.py tests/test_diffusion.py > $OUT/pytest.log 2>&1
tail -1 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head | tee -a $OUT/run.log
gzip -f $OUT/pytest.log
echo "done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
