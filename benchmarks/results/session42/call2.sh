# Session 42 call 2: every family built; load_time.py with the three loaders taking turns (#2); the GPU
# tests of this session's fixes (fused's tensor bias, cem_minimize, the sliced/strided DDPM schedule, the
# steps' vmap without draws, per_sample_grads' sample-mixing probe, the CLI); ddpm_step's benchmark rows.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 -c "import torch; print(torch.__version__, torch.version.cuda)" >> $OUT/run.log
/usr/bin/time -f "build all: %e s" timeout 150 python3 loader.py build > $OUT/build.log 2>&1; tail -1 $OUT/build.log >> $OUT/run.log
timeout 240 python3 benchmarks/load_time.py --out $OUT/load_time.json > $OUT/load_time.log 2>&1
tail -6 $OUT/load_time.log >> $OUT/run.log
timeout 170 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_fused.py tests/test_sampling.py \
  tests/test_loader_review.py tests/test_autograd.py tests/test_diffusion.py \
  "tests/test_linalg.py::test_per_sample_grads_of_linears_whose_tensors_are_used_elsewhere" > $OUT/pytest.log 2>&1
tail -3 $OUT/pytest.log >> $OUT/run.log
timeout 110 python3 benchmarks/run.py --families diffusion --match ddpm_step --out $OUT/bench > $OUT/bench.log 2>&1
tail -8 $OUT/bench.log >> $OUT/run.log
cd $OUT && tar czf logs.tgz build.log pytest.log bench.log bench 2>/dev/null; rm -rf bench build.log bench.log
cat $OUT/run.log
