"""harmonic / rosenbrock / ackley energies and scores on rows the lane-group kernel takes (D = 100, 33):
median of do_bench, one line per case. JITKERNELS_ROOT picks the tree."""
import json, sys, torch, triton.testing
sys.path.insert(0, ".")
import loader
ebm = loader.ebm
out = []
for D, B in [(100, 1 << 16), (33, 1 << 18)]:
    x = torch.randn(B, D, device="cuda")
    for name in ["harmonic_energy", "rosenbrock_energy", "ackley_score"]:
        op = getattr(ebm, name)
        us = triton.testing.do_bench(lambda: op(x), warmup=50, rep=300, return_mode="median") * 1e3
        out.append({"case": f"{name} B={B} D={D}", "us": round(us, 2)})
print(json.dumps({"tree": sys.argv[1], "rows": out}))
