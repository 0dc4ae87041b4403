"""A/B probe: the ops whose bars are missed, from several kernel roots in one process
(each root's build has its own key, so its own op namespace), next to a same-size copy and a plain
2-in-1-out elementwise kernel, timed two ways:
  write-flush: before each call the L2 is flushed by writing 256 MB (triton's do_bench; run.py's way),
               which leaves the L2 full of dirty lines that the timed call then has to write back;
  read-flush:  the L2 is flushed by reading 256 MB (clean lines: the call pays only its own traffic).

    python tools/ab_probe.py --root base=ab/base/kernels --root new=kernels [--only ebm,diffusion,sampling]
"""
import argparse
import statistics
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
import loader  # noqa: E402

FLUSH = torch.empty(256 << 20, dtype=torch.int8, device="cuda")


def time_us(fn, flush: str, reps: int = 100) -> float:
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for _ in range(5):
        fn()
    for s, e in zip(starts, ends):
        if flush == "write":
            FLUSH.zero_()
        else:
            FLUSH.sum(dtype=torch.int32)
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))


def row(label: str, fn, nbytes: int, copy_cache: dict):
    if nbytes not in copy_cache:
        src = torch.empty(nbytes // 8, dtype=torch.float32, device="cuda")
        dst = torch.empty_like(src)
        copy_cache[nbytes] = {f: time_us(lambda: dst.copy_(src), f) for f in ("write", "read")}
    cells = []
    for flush in ("write", "read"):
        us = time_us(fn, flush)
        cells.append(f"{flush}-flush {us:8.1f} us ({100 * copy_cache[nbytes][flush] / us:5.1f}% of copy "
                     f"{copy_cache[nbytes][flush]:.1f})")
    print(f"{label:58s} " + " | ".join(cells), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", action="append", default=[], help="label=path of a kernels folder")
    parser.add_argument("--only", default="ebm,diffusion,sampling")
    args = parser.parse_args()
    roots = [r.split("=", 1) for r in args.root] or [["repo", str(REPO / "kernels")]]
    only = args.only.split(",")
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "cuda", torch.version.cuda)
    copies = {}
    torch.manual_seed(0)
    if "ebm" in only:
        B, D = 2 ** 21, 16
        x = torch.randn(B, D, device="cuda")
        mean = torch.randn(D, device="cuda")
        a = torch.randn(D, D, dtype=torch.float64)
        prec = (a @ a.T / D + torch.eye(D, dtype=torch.float64)).cuda().float()
        nbytes = x.numel() * 4 + B * 4
        for label, root in roots:
            ebm = loader.load("ebm", root)
            row(f"[{label}] gaussian_energy f32 B=2^21 D=16", lambda: ebm.gaussian_energy(x, mean, prec), nbytes, copies)
            row(f"[{label}] harmonic_energy f32", lambda: ebm.harmonic_energy(x), nbytes, copies)
            row(f"[{label}] gaussian_score f32", lambda: ebm.gaussian_score(x, mean, prec), 2 * x.numel() * 4, copies)
            for model in ("rastrigin", "ackley"):
                energy, score = getattr(ebm, f"{model}_energy"), getattr(ebm, f"{model}_score")
                row(f"[{label}] {model}_energy f32", lambda: energy(x), nbytes, copies)
                row(f"[{label}] {model}_score f32", lambda: score(x), 2 * x.numel() * 4, copies)
            row(f"[{label}] langevin_step f32 (gaussian score given)", lambda: ebm.langevin_step(x, x, 0.01),
                3 * x.numel() * 4, copies)
    if "diffusion" in only:
        m, xs = (torch.randn(256, 16, 2048, device="cuda") for _ in range(2))
        t = torch.randint(1, 1000, (256,), device="cuda")
        out = torch.empty_like(m)
        nbytes = 3 * m.numel() * 4
        row("eager torch.add(m, x, out=) 256x16x2048", lambda: torch.add(m, xs, out=out), nbytes, copies)
        for label, root in roots:
            fused = loader.load("fused", root)
            row(f"[{label}] fused.relu_add(m, x) (2 reads, 1 write)", lambda: fused.relu_add(m, xs), nbytes, copies)
            D = loader.load("diffusion", root)
            sched = D.ddpm_schedule(1000, "linear", device="cuda")
            row(f"[{label}] ddpm_step drawn, per-row t", lambda: D.ddpm_step(m, t, xs, sched), nbytes, copies)
            row(f"[{label}] ddim_step eta=0, per-row t", lambda: D.ddim_step(m, t, t - 1, xs, sched), nbytes, copies)
    if "sampling" in only:
        d, n = 5000, 65536
        mean, std = torch.randn(d, device="cuda"), torch.rand(d, device="cuda") + 0.5
        for label, root in roots:
            S = loader.load("sampling", root)
            for dtype in (torch.float32, torch.bfloat16):
                row(f"[{label}] normal n=65536 d=5000 {dtype}", lambda: S.normal(mean, std, n, dtype=dtype),
                    n * d * torch.empty(0, dtype=dtype).element_size(), copies)


if __name__ == "__main__":
    main()
