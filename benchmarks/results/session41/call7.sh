# Session 41 call 7: matrix_inverse_root with float32 entries above FLT_MAX/2 (a helper's docstring audit:
# the CPU's eigh routes raised or gave 0; now NaN): its test and the other inverse-root tests on the GPU,
# where the "never" route is our CUDA kernels (small: one block per matrix; general: Newton-Schulz).
set -u
export PYTHONUNBUFFERED=1 JITKERNELS_CACHE=/tmp/jitkernels-cache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/run.log
python3 loader.py build linalg > $OUT/build.log 2>&1
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_linalg.py -k "inverse_root or Shampoo or shampoo" \
  tests/test_autograd.py tests/test_bad_input.py 2>&1 | tail -15 >> $OUT/run.log
python3 - >> $OUT/run.log 2>&1 <<'PY'
import torch, loader
f = loader.linalg
for n in (1, 3, 16, 32, 64, 65, 256):
    A = torch.full((n, n), 2e38, device="cuda")
    row = []
    for fallback in ("never", "auto", "always"):
        X = f.matrix_inverse_root(A, fallback=fallback)
        row.append(f"{fallback}: nan {torch.isnan(X).float().mean().item():.2f} zero {(X == 0).float().mean().item():.2f}")
    print(f"n={n}", "; ".join(row))
PY
cat $OUT/run.log
