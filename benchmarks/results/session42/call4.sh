# Session 42 call 4: the CUDA reviews' fixes on the GPU. HEAD's sampling, linalg and diffusion, the new tests
# and the touched ones (cem_update, the small inverse-root route, conv1d_gn_mish); then the same new tests
# on 3659a3f's kernels (before the fixes: ab/s42/pre), where their CUDA cases should fail.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
NEW="tests/test_sampling.py::test_cem_update_an_infinite_first_elite_value_gives_an_infinite_mean
 tests/test_diffusion.py::test_conv1d_gn_mish_refuses_zero_input_channels"
for tree in head pre; do
  root=kernels; [ $tree = pre ] && root=ab/s42/pre/kernels
  export JITKERNELS_CACHE=/tmp/jkc-$tree JITKERNELS_ROOT=$root
  /usr/bin/time -f "$tree build: %e s" timeout 90 python3 loader.py build sampling linalg diffusion > $OUT/build_$tree.log 2>&1
  tail -1 $OUT/build_$tree.log >> $OUT/run.log
  if [ $tree = head ]; then
    timeout 120 python3 -m pytest -q -p no:cacheprovider -n 8 $NEW tests/test_linalg.py -k "small or cem_update or conv1d" \
      tests/test_sampling.py tests/test_diffusion.py > $OUT/pytest_$tree.log 2>&1
  else
    timeout 60 python3 -m pytest -q -p no:cacheprovider -n 8 $NEW \
      "tests/test_linalg.py::test_inverse_root_small_matrices_cuda" > $OUT/pytest_$tree.log 2>&1
  fi
  echo "$tree:" >> $OUT/run.log; grep -E "^FAILED|passed|failed" $OUT/pytest_$tree.log | cut -c1-200 | tail -12 >> $OUT/run.log
done
cat $OUT/run.log
