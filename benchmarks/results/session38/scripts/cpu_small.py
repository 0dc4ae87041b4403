"""matrix_inverse_root on the CPU at small n: the kernels root given (JITKERNELS_ROOT) against eigh (us, best of 5 medians)."""
import json, os, statistics, sys, time
import torch
sys.path.insert(0, os.getcwd())
import loader
f = loader.load("linalg")

def us(fn, reps=20):
    fn()
    meds = []
    for _ in range(5):
        t = []
        for _ in range(reps):
            s = time.perf_counter(); fn(); t.append(time.perf_counter() - s)
        meds.append(statistics.median(t))
    return min(meds) * 1e6

for dtype in (torch.float32, torch.float64):
    for n in [int(v) for v in sys.argv[2].split(",")]:
        for nb in (1, 16):
            torch.manual_seed(0)
            Q, _ = torch.linalg.qr(torch.randn(nb, n, n, dtype=torch.float64))
            lam = torch.logspace(0, -3, n, dtype=torch.float64)
            A = ((Q * lam) @ Q.mT).to(dtype); A = ((A + A.mT) / 2)
            if nb == 1: A = A[0]
            ours = us(lambda: f.matrix_inverse_root(A, 4, 1e-6, fallback="never"))
            eigh = us(lambda: f.reference.matrix_inverse_root_eigh(A, 4, 1e-6))
            X = f.matrix_inverse_root(A, 4, 1e-6, fallback="never"); R = f.reference.matrix_inverse_root(A.double(), 4, 1e-6)
            print(json.dumps({"tree": sys.argv[1], "dtype": str(dtype)[6:], "n": n, "batch": nb, "ours_us": round(ours, 1),
                              "eigh_us": round(eigh, 1), "rel_err": float(((X.double() - R).norm() / R.norm()))}), flush=True)
