#!/usr/bin/env bash
# One device call: build the named families from each kernels root (all at once), then the A/B probe and
# the CUDA tests of what changed. ROOTS="base=ab/base/kernels new=kernels" FAMILIES="fused ebm diffusion sampling"
# (a root may name its own families: "base=ab/base/kernels:diffusion,sampling")
# TESTS="tests/test_ebm.py -k gaussian" (pytest arguments; empty: none) PROBE_ONLY=ebm,diffusion,sampling
set -u -o pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 JITKERNELS_CACHE=${JITKERNELS_CACHE:-/tmp/jitkernels-cache} MAX_JOBS=${MAX_JOBS:-16}
ROOTS=${ROOTS:-"base=ab/base/kernels new=kernels"}
FAMILIES=${FAMILIES:-"fused ebm diffusion sampling"}
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"
} 2>&1 | tee "$OUT/run.log"
start=$(date +%s)
probe_roots=()
for pair in $ROOTS; do
  label=${pair%%=*}; root=${pair#*=}; families=$FAMILIES
  case $root in *:*) families=${root#*:}; families=${families//,/ }; root=${root%%:*} ;; esac
  probe_roots+=(--root "$label=$root")
  for family in $families; do
    JITKERNELS_ROOT=$root python3 loader.py build "$family" > "$OUT/build_${label}_$family.log" 2>&1 &
  done
done
wait
echo "== builds took $(( $(date +%s) - start )) s" | tee -a "$OUT/run.log"
grep -l "BuildError\|Traceback" "$OUT"/build_*.log && cat "$OUT"/build_*.log | tail -40
python3 tools/ab_probe.py "${probe_roots[@]}" --only "${PROBE_ONLY:-ebm,diffusion,sampling}" \
  2>&1 | tee "$OUT/probe.log"
if [ -n "${TESTS:-}" ]; then
  python3 -m pytest -q -p no:cacheprovider -x --timeout=300 -n 4 $TESTS 2>&1 | tail -15 | tee "$OUT/pytest.log"
fi
echo "== call took $(( $(date +%s) - start )) s" | tee -a "$OUT/run.log"
