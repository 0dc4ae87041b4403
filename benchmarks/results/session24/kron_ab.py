"""Scratch A/B of kron_slots_kernel orderings (ab/, not in git): ours (linalg) vs variants vs torch.compile."""
import sys, statistics, json
import torch
sys.path.insert(0, ".")
import loader
from triton.testing import do_bench
sys.path.insert(0, "benchmarks")
from run import time_us_clean_l2
la = loader.linalg
kv = loader.load("kronab", root="ab/kronab/kernels")
ref = la.reference
NAMES = ["stream,chunk,slot-fast", "plain,chunk,slot-fast", "stream,interleave,slot-fast", "plain,interleave,slot-fast",
         "stream,chunk,chunk-fast", "plain,chunk,chunk-fast", "stream,interleave,chunk-fast", "plain,interleave,chunk-fast"]
def bench(fn):
    return do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e3, time_us_clean_l2(fn)
torch.manual_seed(0)
for label, A, B, ours, refn in [
    ("per_sample B=256 1024->1024", torch.randn(256, 1024, 1, device="cuda"), torch.randn(256, 1, 1024, device="cuda"),
     None, None),
    ("kron 50x50 (x) 100x100", torch.randn(1, 50, 50, device="cuda"), torch.randn(1, 100, 100, device="cuda"), None, None)]:
    if label.startswith("per_sample"):
        g, x = A[:, :, 0].contiguous(), B[:, 0, :].contiguous()
        ours = lambda: la.per_sample_grad_linear(x, g, False)
        comp = torch.compile(lambda x, g: ref.per_sample_grad_linear(x, g, False)[0])
        cfn = lambda: comp(x, g)
        expected = ref.per_sample_grad_linear(x, g, False)[0]
    else:
        A2, B2 = A[0], B[0]
        ours = lambda: la.kron(A2, B2)
        comp = torch.compile(ref.kron)
        cfn = lambda: comp(A2, B2)
        expected = ref.kron(A, B)
    rows = {"ours (linalg)": bench(ours), "torch.compile": bench(cfn)}
    for v, name in enumerate(NAMES):
        if v not in (1, 4, 5, 7):
            continue
        for chunks in ([0, 256, 512, 1024] if "per_sample" in label else [0, 10, 25, 50]):
            out = kv.ops.kron_variant(A, B, v, chunks)
            torch.testing.assert_close(out.view_as(expected), expected)
            rows[f"v{v} {name} chunks={chunks or 'auto'}"] = bench(lambda: kv.ops.kron_variant(A, B, v, chunks))
    rows["ours (linalg) again"] = bench(ours)
    rows["torch.compile again"] = bench(cfn)
    print(f"== {label}: do_bench us / clean-L2 us")
    for k, (a, b) in rows.items():
        print(f"  {k:50s} {a:8.1f} {b:8.1f}")
