"""Session 12 kron A/B: committed kernel (streaming stores) vs P (plain stores) vs Q (plain stores, 4x more row chunks)."""
import sys
import torch
sys.path.insert(0, ".")
import loader
from benchmarks.run import time_us, copy_rate_gbps
rate = copy_rate_gbps("cuda")
variants = {"base": loader.load("linalg"), "P": loader.load("linalg", root="scratch/krootP"),
            "Q": loader.load("linalg", root="scratch/krootQ")}
comp = torch.compile(torch.kron)
for (m, k) in [(50, 100), (64, 64), (30, 200)]:
    A, B = torch.randn(m, m, device="cuda"), torch.randn(k, k, device="cuda")
    ref = torch.kron(A, B)
    for name, f in variants.items():
        assert torch.equal(f.kron(A, B), ref), name
    floor = ref.numel() * 4 / rate / 1e3
    for r in range(3):
        t = {name: time_us(lambda f=f: f.kron(A, B), "cuda") for name, f in variants.items()}
        t["compile"] = time_us(lambda: comp(A, B), "cuda")
        print(f"kron {m}x{m} (x) {k}x{k} round {r}: " + ", ".join(f"{n} {v:.1f} us ({100 * floor / v:.0f}%)" for n, v in t.items()), flush=True)
