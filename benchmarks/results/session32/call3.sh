# Session 32 call 3: (1) the chains' tile load with every global load issued before the shared stores,
# and one resident wave of blocks (ebm_rows.cuh, ebm_langevin.cuh, ebm_hmc.cu); (2) 16-bit Gaussian
# rows of 16 on the tensor cores (ebm.cu). chain_probe.py against the session's start (ab/s32/base,
# carried), alternating; then the ebm tests on the GPU.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16 JITKERNELS_CACHE=$PWD/build/jkcache PYTHONPATH=$PWD
P=benchmarks/results/session32
echo "tree: $(cat commit.txt) + uncommitted ebm edits" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
t0=$(date +%s)
python3 -c "import loader; loader.prebuild()" > $OUT/build.log 2>&1 &
python3 -c "import loader; loader.prebuild(['ebm'], root='ab/s32/base/kernels')" > $OUT/build_base.log 2>&1
wait
echo "builds: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
for round in 1 2; do
  echo "== base" | tee -a $OUT/run.log; timeout 200 python3 $P/chain_probe.py ab/s32/base/kernels 2>&1 | tee -a $OUT/run.log
  echo "== new" | tee -a $OUT/run.log; timeout 200 python3 $P/chain_probe.py 2>&1 | tee -a $OUT/run.log
done
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 250 tests/test_ebm.py tests/test_audit.py tests/test_autograd.py > $OUT/pytest.log 2>&1
tail -2 $OUT/pytest.log | tee -a $OUT/run.log; grep -E "^FAILED|^ERROR" $OUT/pytest.log | head -30 | tee -a $OUT/run.log
gzip -f $OUT/pytest.log
echo "all done: $(( $(date +%s) - t0 )) s" | tee -a $OUT/run.log
