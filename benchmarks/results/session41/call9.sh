# Session 41 call 9: the final review's mend (ae72d11: loader.register_batch_dim_vmap replaces the per-family
# vmap rules; the autograd-twin lookup shared with register_drawing_vmap): fused's, linalg's and the drawing
# ops' vmap tests, the loader's warm-load tests, on the GPU.
set -u
export PYTHONUNBUFFERED=1 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 loader.py build > $OUT/build.log 2>&1
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_fused.py tests/test_linalg.py tests/test_sampling.py \
  tests/test_ebm.py tests/test_diffusion.py tests/test_autograd.py tests/test_determinism.py \
  -k "vmap or drawing or tagged or batched_call or one_call or inverse_root or kron" 2>&1 | tail -2 >> $OUT/run.log
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_loader.py -k "warm or prints_nothing" 2>&1 | tail -1 >> $OUT/run.log
cat $OUT/run.log
