# Session 53, call 4: the GPU tests of this session's code (call 3's seven files, cut at 91% there, plus test_sampling
# and the loader's pickling test), then the sweep's cases with peak memory while time remains.
set -u; unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/tree.txt
STEPS="build" OUT=$OUT timeout 170 bash tools/gpu_check.sh > /dev/null; rm -f $OUT/build_*.log
export PYTHONPATH=. JITKERNELS_CACHE=/tmp/jitkernels-cache
timeout 330 python3 -m pytest -q -p no:cacheprovider -n 15 --timeout=300 -m "not large" tests/test_ebm.py tests/test_linalg.py \
  tests/test_diffusion.py tests/test_autograd.py tests/test_fused.py tests/test_autocast.py tests/test_bad_input.py \
  tests/test_sampling.py "tests/test_loader.py::test_kept_ops_and_families_pickle_by_name" > $OUT/pytest.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/pytest.log | tail -12
gzip -f $OUT/pytest.log
timeout 80 python3 tools/shape_sweep.py --out $OUT --families fused sampling diffusion linalg ebm train --max-seconds 60 \
  --match "B=1024 D=1000" "n=4097 d=4097" "256x16x2048" "B=16 C=512->1024" "kron 64x64" "n=16777216" > $OUT/sweep.log 2>&1
grep -v "^W1\|warn\|If it is\|check(" $OUT/sweep.log | tail -25
