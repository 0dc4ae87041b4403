#!/usr/bin/env bash
# session 12: where a warm load of `fused` goes on the GPU host (fresh processes after import torch + CUDA init)
set -u
OUT=${OUT:-gpu_out}
export JITKERNELS_CACHE=/tmp/jitkernels-cache PYTHONUNBUFFERED=1
python3 loader.py build fused 2>&1 | tail -1
for i in $(seq 1 15); do python3 - <<'PY'
import sys, time, torch
torch.zeros(1, device="cuda")
sys.path.insert(0, ".")
a = time.perf_counter(); import loader; b = time.perf_counter(); loader.load("fused"); c = time.perf_counter()
print(f"import {1e3 * (b - a):.2f} ms load {1e3 * (c - b):.2f} ms total {1e3 * (c - a):.2f}")
PY
done 2>&1 | tee "$OUT/load_runs.log"
for i in 1 2; do python3 - <<'PY'
import sys, time, torch, cProfile, pstats, io
torch.zeros(1, device="cuda")
sys.path.insert(0, ".")
pr = cProfile.Profile(); pr.enable()
import loader; loader.load("fused")
pr.disable(); s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(30); print(s.getvalue())
PY
done 2>&1 | tee "$OUT/load_profile.log" | grep -E "function calls|loader.py|ops.py|load_library|dlopen|register_autograd|sha|stat|read" | head -60
