"""Look for shapes where one of our ops is slower than eager PyTorch or torch.compile (GPU).

benchmarks/run.py times the issues' sizes; this sweeps each op over small, odd, wide and narrow
shapes and other dtypes, where a kernel tuned for the issue's size can fall behind. Every case is
timed the way a Python loop sees it: calls made back to back, synchronised once a round (host time
included when the op is launch-bound, device time otherwise), median of rounds.

    python tools/shape_sweep.py --out DIR [--families ebm sampling train] [--match "relu_add n=1677"]
        [--max-seconds 400]

Writes DIR/sweep.jsonl (one line a case, written as it goes, so a cut run keeps what it measured)
and prints the cases where ours is more than 5% behind eager or torch.compile, or needs more than 1.5x
their peak memory (CUDA).
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import loader  # noqa: E402

BEHIND = 1.05  # ours slower than this times the best baseline is reported
DEVICE = "cuda"  # --device cpu: a smoke run of the script itself


def _sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def per_call_us(fn, rounds: int = 5, round_seconds: float = 0.004) -> float:
    """Microseconds per call of back-to-back calls, median of `rounds`."""
    for _ in range(3):
        fn()
    _sync()
    start = time.perf_counter()
    fn()
    _sync()
    once = time.perf_counter() - start
    calls = max(5, min(500, int(round_seconds / max(once, 1e-6))))
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        _sync()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def peak_mib(fn) -> float:
    """MiB allocated at the peak of one call beyond what was allocated before it (CUDA; 0 on the CPU)."""
    if DEVICE != "cuda":
        return 0.0
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2 ** 20


def _rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, device=DEVICE).to(dtype)


def _precision(D, dtype):
    a = torch.randn(D, D, dtype=torch.float64)
    return (a @ a.T / D + torch.eye(D, dtype=torch.float64)).to(DEVICE, dtype)


def ebm_cases():
    fam = loader.load("ebm")
    ref = fam.reference
    f32, bf16, f16, f64 = torch.float32, torch.bfloat16, torch.float16, torch.float64
    shapes = [((1, 16), f32), ((4096, 1), f32), ((65536, 3), f32), ((1 << 16, 17), f32), ((1 << 14, 64), f32),
              ((1024, 1000), f32), ((16, 1 << 16), f32), ((1 << 20, 2), f32),
              ((1 << 20, 16), bf16), ((1 << 20, 16), f16), ((4096, 100), bf16), ((1 << 18, 16), f64)]
    for (B, D), dtype in shapes:
        x = _rand(B, D, dtype=dtype)
        for model in ("double_well", "rosenbrock", "ackley", "gaussian"):
            if model == "rosenbrock" and D < 2 or model == "gaussian" and D > 1024:
                continue
            extra = (_rand(D, dtype=dtype), _precision(D, dtype)) if model == "gaussian" else ()
            for kind, table in (("energy", ref.ENERGIES), ("score", ref.SCORES)):
                yield (f"{model}_{kind}", f"B={B} D={D}", dtype, getattr(fam, f"{model}_{kind}"), table[model],
                       (x, *extra))
        g = torch.randn_like(x)
        yield ("langevin_step", f"B={B} D={D}", dtype, lambda x, g: fam.langevin_step(x, g, 0.01),
               lambda x, g: ref.langevin_step(x, g, 0.01), (x, g))


def sampling_cases():
    fam = loader.load("sampling")
    ref = fam.reference
    for (n, d), dtype in [((1, 1), torch.float32), ((1, 1 << 20), torch.float32), ((1 << 20, 1), torch.float32),
                          ((1000, 3), torch.float32), ((65536, 7), torch.float32), ((4097, 4097), torch.float32),
                          ((1 << 20, 16), torch.float32), ((4097, 4097), torch.bfloat16),
                          ((1 << 20, 16), torch.float16), ((65536, 7), torch.bfloat16), ((4096, 100), torch.float64)]:
        mean, std = torch.randn(d, device=DEVICE), torch.rand(d, device=DEVICE) + 0.1
        yield ("normal", f"n={n} d={d}", dtype, lambda m, s, n=n, dt=dtype: fam.normal(m, s, n, dtype=dt),
               lambda m, s, n=n, dt=dtype: ref.normal(m, s, n, dtype=dt), (mean, std))
    for n, d, k in [(100, 10, 10), (1000, 2, 100), (65536, 1, 6554), (1024, 5000, 100), (1 << 20, 4, 1000),
                    (4096, 1000, 1), (4096, 1000, 4096)]:
        x, s = torch.randn(n, d, device=DEVICE), torch.randn(n, device=DEVICE)
        m, sd = torch.zeros(d, device=DEVICE), torch.ones(d, device=DEVICE)
        yield ("cem_update", f"n={n} d={d} elite={k}", torch.float32,
               lambda x, s, m, sd, k=k: fam.cem_update(x, s, k, m, sd, 0.1, 0.01),
               lambda x, s, m, sd, k=k: ref.cem_update(x, s, k, m, sd, 0.1, 0.01), (x, s, m, sd))


def diffusion_cases():
    fam = loader.load("diffusion")
    ref = fam.reference
    sched = fam.ddpm_schedule(1000, "linear", device=DEVICE)
    for shape, dtype, per_row in [((1, 2, 16), torch.float32, False), ((16, 2, 16), torch.float32, True),
                                  ((64, 7, 33), torch.float32, True), ((256, 16, 2048), torch.bfloat16, True),
                                  ((256, 16, 2048), torch.float16, False), ((4, 1, 1 << 20), torch.float32, True)]:
        m, x, z = (_rand(*shape, dtype=dtype) for _ in range(3))
        t = torch.randint(1, 1000, (shape[0],) if per_row else (), device=DEVICE)
        label = "x".join(map(str, shape)) + (" per-row t" if per_row else " scalar t")
        yield ("ddpm_step noise drawn", label, dtype, lambda m, t, x: fam.ddpm_step(m, t, x, sched),
               lambda m, t, x: ref.ddpm_step(m, t, x, sched), (m, t, x))
        yield ("ddpm_step noise given", label, dtype, lambda m, t, x, z: fam.ddpm_step(m, t, x, sched, z),
               lambda m, t, x, z: ref.ddpm_step(m, t, x, sched, z), (m, t, x, z))
        yield ("ddim_step eta=0", label, dtype, lambda m, t, x: fam.ddim_step(m, t, t - 1, x, sched),
               lambda m, t, x: ref.ddim_step(m, t, t - 1, x, sched), (m, t, x))
    f32, bf16, f16 = torch.float32, torch.bfloat16, torch.float16
    for B, cin, cout, L, K, G, dtype in [(1, 2, 16, 16, 5, 8, f32), (1, 64, 64, 1, 3, 8, f32), (8, 64, 128, 64, 5, 8, f32),
                                         (1, 256, 256, 16, 1, 32, f32), (1, 256, 256, 16, 7, 1, f32),
                                         (64, 32, 32, 256, 3, 8, f32), (1, 2048, 2048, 4, 5, 8, f32),
                                         (16, 512, 1024, 8, 5, 8, bf16), (1, 256, 256, 16, 5, 8, f16),
                                         (4, 16, 16, 1024, 5, 4, f32)]:
        x = _rand(B, cin, L, dtype=dtype)
        w = _rand(cout, cin, K, dtype=dtype) * (cin * K) ** -0.5
        b, gw, gb = (_rand(cout, dtype=dtype) for _ in range(3))
        yield ("conv1d_gn_mish", f"B={B} C={cin}->{cout} L={L} K={K} G={G}", dtype,
               lambda *a, G=G: fam.conv1d_gn_mish(*a, G), lambda *a, G=G: ref.conv1d_gn_mish(*a, G), (x, w, b, gw, gb))


def fused_cases():
    fam = loader.load("fused")
    for n, dtype, transposed in [(1, torch.float32, False), (1000, torch.float32, False),
                                 ((1 << 20) + 3, torch.float32, False), ((1 << 20) + 3, torch.float16, False),
                                 (1 << 24, torch.float32, True), (1 << 24, torch.bfloat16, True),
                                 (1 << 22, torch.float64, False)]:
        if transposed:  # a non-contiguous view
            side = 1 << 12
            x, y = (_rand(side, n // side, dtype=dtype).t() for _ in range(2))
        else:
            x, y = _rand(n, dtype=dtype), _rand(n, dtype=dtype)
        yield ("relu_add", f"n={n}" + (" transposed" if transposed else ""), dtype, fam.relu_add,
               fam.reference.relu_add, (x, y, 0.5))


def linalg_cases():
    fam = loader.load("linalg")
    ref = fam.reference
    for m, k in [(2, 3), (16, 16), (64, 200), (300, 10)]:
        A, B = torch.randn(m, m, device=DEVICE), torch.randn(k, k, device=DEVICE)
        yield ("kron", f"{m}x{m} (x) {k}x{k}", torch.float32, fam.kron, torch.kron, (A, B))
    for bsz, din, dout in [(1, 16, 16), (32, 3, 1000), (512, 128, 128), (64, 4096, 64)]:
        x, g = torch.randn(bsz, din, device=DEVICE), torch.randn(bsz, dout, device=DEVICE)
        yield ("per_sample_grad_linear", f"B={bsz} {din}->{dout}", torch.float32, fam.per_sample_grad_linear,
               ref.per_sample_grad_linear, (x, g))


def _leaf(*shape, dtype=torch.float32, scale=1.0):
    return (_rand(*shape, dtype=dtype) * scale).requires_grad_()


def train_cases():
    """Forward and backward (out.sum().backward()) of the differentiable ops, where a training loop
    meets our backward formulas (several recompute with PyTorch ops)."""
    ebm, diffusion = loader.load("ebm"), loader.load("diffusion")
    fused, linalg = loader.load("fused"), loader.load("linalg")
    for B, D, dtype in [(1 << 20, 16, torch.float32), (1024, 1000, torch.float32), (1 << 20, 16, torch.bfloat16)]:
        x = _leaf(B, D, dtype=dtype)
        for model in ("rosenbrock", "ackley", "gaussian"):
            extra = (_rand(D, dtype=dtype), _precision(D, dtype)) if model == "gaussian" else ()
            yield ("ebm", f"{model}_energy backward", f"B={B} D={D}", dtype, getattr(ebm, f"{model}_energy"),
                   ebm.reference.ENERGIES[model], (x, *extra))
    for n, dtype in [(1 << 24, torch.float32), (1 << 24, torch.bfloat16)]:
        yield ("fused", "relu_add backward", f"n={n}", dtype, fused.relu_add, fused.reference.relu_add,
               (_leaf(n, dtype=dtype), _leaf(n, dtype=dtype), 0.5))
    for B, cin, cout, L, dtype in [(1, 256, 256, 16, torch.float32), (8, 64, 128, 64, torch.float32),
                                   (64, 256, 512, 16, torch.float32), (256, 256, 512, 16, torch.bfloat16)]:
        K, G = 5, 8
        args = (_leaf(B, cin, L, dtype=dtype), _leaf(cout, cin, K, dtype=dtype, scale=(cin * K) ** -0.5),
                _leaf(cout, dtype=dtype), _leaf(cout, dtype=dtype), _leaf(cout, dtype=dtype))
        yield ("diffusion", "conv1d_gn_mish backward", f"B={B} C={cin}->{cout} L={L} K={K} G={G}", dtype,
               lambda *a, G=G: diffusion.conv1d_gn_mish(*a, G),
               lambda *a, G=G: diffusion.reference.conv1d_gn_mish(*a, G), args)
    sched = diffusion.ddpm_schedule(1000, "linear", device=DEVICE)
    for shape in [(1, 2, 16), (256, 16, 2048)]:
        m, x = _leaf(*shape), _rand(*shape)
        t = torch.randint(1, 1000, (shape[0],), device=DEVICE)
        z = _rand(*shape)
        yield ("diffusion", "ddpm_step backward (model_output)", "x".join(map(str, shape)), torch.float32,
               lambda m, t, x, z: diffusion.ddpm_step(m, t, x, sched, z),
               lambda m, t, x, z: diffusion.reference.ddpm_step(m, t, x, sched, z), (m, t, x, z))
    for m, k in [(16, 16), (64, 200)]:
        yield ("linalg", "kron backward", f"{m}x{m} (x) {k}x{k}", torch.float32, linalg.kron, torch.kron,
               (_leaf(m, m), _leaf(k, k)))
    for n in (32, 256):
        a = torch.randn(n, n, device=DEVICE, dtype=torch.float64)
        A = (a @ a.T / n + torch.eye(n, device=DEVICE, dtype=torch.float64)).float().requires_grad_()
        yield ("linalg", "matrix_inverse_root backward", f"n={n}", torch.float32,
               lambda A: linalg.matrix_inverse_root(A, 4, 1e-6),
               lambda A: linalg.reference.matrix_inverse_root_eigh(A, 4, 1e-6), (A,))


def _backward_of(fn):
    def forward_backward(*inputs):
        fn(*inputs).float().sum().backward()
    return forward_backward


FAMILIES = {"ebm": ebm_cases, "sampling": sampling_cases, "diffusion": diffusion_cases, "fused": fused_cases,
            "linalg": linalg_cases}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--families", nargs="*", default=[*FAMILIES, "train"],
                        help="families, and 'train' for forward + backward of the differentiable ops")
    parser.add_argument("--max-seconds", type=float, default=1e9, help="stop starting new cases after this")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--match", nargs="*", default=[],
                        help="only cases whose 'family op shape dtype' contains every word of one of these")
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    args.out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.max_seconds
    behind = []
    with open(args.out / "sweep.jsonl", "a") as log:
        for family in args.families:
            for case in FAMILIES[family]() if family != "train" else train_cases():
                if family == "train":  # (family, op, ...): the family of the op, the times of forward + backward
                    family_name, op, shape, dtype, ours, reference, inputs = case
                    ours, reference = _backward_of(ours), _backward_of(reference)
                else:
                    family_name, (op, shape, dtype, ours, reference, inputs) = family, case
                if time.monotonic() > deadline:
                    print(f"stopped before {family}'s next case: --max-seconds reached", flush=True)
                    return 0
                row = {"family": family_name, "op": op, "shape": shape, "dtype": str(dtype).removeprefix("torch.")}
                label = " ".join(row.values())
                if args.match and not any(all(w in label for w in m.split()) for m in args.match):
                    continue
                row["ours_us"] = per_call_us(lambda: ours(*inputs))
                row["eager_us"] = per_call_us(lambda: reference(*inputs))
                row["ours_mib"] = peak_mib(lambda: ours(*inputs))
                row["eager_mib"] = peak_mib(lambda: reference(*inputs))
                try:
                    torch._dynamo.reset()
                    compiled = torch.compile(reference, dynamic=False)
                    compiled(*inputs)
                    row["compile_us"] = per_call_us(lambda: compiled(*inputs))
                    row["compile_mib"] = peak_mib(lambda: compiled(*inputs))
                except Exception as exc:  # report, don't stop the sweep
                    row["compile_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                best = min(row.get("eager_us", 1e30), row.get("compile_us", 1e30))
                row["vs_best"] = best / row["ours_us"]
                log.write(json.dumps(row) + "\n")
                log.flush()
                flag = "  BEHIND" if row["ours_us"] > BEHIND * best else ""
                least_mib = min(row["eager_mib"], row.get("compile_mib", 1e30))
                if row["ours_mib"] > 1.5 * least_mib + 1:  # more memory than a baseline (1 MiB of slack)
                    flag += f"  MEMORY {row['ours_mib']:.0f} MiB against {least_mib:.0f}"
                print(f"{family_name:9} {op:24} {shape:28} {row['dtype']:9} ours {row['ours_us']:9.1f}  "
                      f"eager {row['eager_us']:9.1f}  compile {row.get('compile_us', float('nan')):9.1f}{flag}",
                      flush=True)
                if flag:
                    behind.append((row, flag))
    print(f"\n{len(behind)} cases behind eager or torch.compile by more than {BEHIND - 1:.0%} in time, or by half "
          "in peak memory:")
    for row, flag in behind:
        print(f"  {row['family']} {row['op']} {row['shape']} {row['dtype']}: ours {row['ours_us']:.1f} us, "
              f"best baseline {min(row['eager_us'], row.get('compile_us', 1e30)):.1f} us{flag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
