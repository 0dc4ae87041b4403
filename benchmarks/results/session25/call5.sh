# Session 25's last call: diffusion's first build (split into two .cu files) against e600511's single
# file, each alone on an empty cache; then diffusion's GPU tests and the CUDA audit on this tree.
set -u
export PYTHONUNBUFFERED=1 MAX_JOBS=16
cp commit.txt $OUT/
t0=$(date +%s)
for v in new cur; do
  root=$PWD/kernels; [ $v = cur ] && root=$PWD/ab/cur/kernels
  rm -rf /tmp/fb_$v
  s=$(date +%s.%N)
  JITKERNELS_CACHE=/tmp/fb_$v JITKERNELS_ROOT=$root timeout 90 python3 loader.py build diffusion 2>&1 | grep built | sed "s/^/$v: /" | tee -a $OUT/first_build.log
  echo "$v: wall $(python3 -c "import time; print(round(time.time() - $s, 1))") s" | tee -a $OUT/first_build.log
done
export JITKERNELS_CACHE=/tmp/fb_new
echo "builds: $(( $(date +%s) - t0 )) s"
timeout 100 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 95 tests/test_diffusion.py > $OUT/pytest_diffusion.log 2>&1; tail -2 $OUT/pytest_diffusion.log; grep -E "^FAILED|^ERROR" $OUT/pytest_diffusion.log | head
echo "pytest done: $(( $(date +%s) - t0 )) s"
timeout 60 python3 -c "import loader; loader.prebuild()" > $OUT/build_rest.log 2>&1
timeout 60 python3 tools/audit_ops.py --device cuda > $OUT/audit_cuda.log 2>&1; echo "audit rc=$?"; tail -2 $OUT/audit_cuda.log
echo "all done: $(( $(date +%s) - t0 )) s"
