#!/usr/bin/env bash
# session 11 call 3: separable ebm scores through jk::cuda_elementwise, A/B against the row tiles
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
STEPS="build" FAMILIES=ebm bash tools/gpu_check.sh > "$OUT/build.out" 2>&1; tail -3 "$OUT/build.out"
for round in 1 2 3 4; do for mode in 0 1; do JK_AB_FLAT=$mode python3 scratch/ab_flat.py; done; done 2>&1 | tee "$OUT/ab_flat.log"
JK_AB_FLAT=1 timeout 170 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_ebm.py tests/test_bad_input.py -k "ebm or score or harmonic or double_well or rastrigin" 2>&1 | tail -5 | tee "$OUT/pytest_flat.log"
JK_AB_FLAT=1 timeout 150 python3 benchmarks/run.py --families ebm --out "$OUT/bench_flat" --match "harmonic_score" "double_well_score" "rastrigin_score" 2>&1 | grep "^| ebm" | tee "$OUT/bench_flat.log"
