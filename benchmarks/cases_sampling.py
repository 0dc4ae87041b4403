"""Benchmark cases for family `sampling` (sizes from the issue; `small=True` is a quick smoke run)."""
import torch

import loader
from benchmarks.common import Case

BLOG_DIMS = [10, 50, 100, 500, 1000, 2500, 4910]  # n = 1024, the blog's CEM sampling sizes


def _normal_case(fam, ref, n, d, dtype, device, note="", launch_bound=False):
    mean = torch.randn(d, device=device)
    std = torch.rand(d, device=device) + 0.1
    size = torch.empty((), dtype=dtype).element_size()
    return Case(
        family="sampling", op="normal", shape=f"n={n} d={d}", dtype=str(dtype).removeprefix("torch."),
        ours=lambda m, s: fam.normal(m, s, n, dtype=dtype),
        reference=lambda m, s: ref.normal(m, s, n, dtype=dtype),
        args=(mean, std), bytes=n * d * size + 2 * d * 4, note=note, random=True, launch_bound=launch_bound,
    )


def cases(device: str, small: bool = False) -> list[Case]:
    fam = loader.load("sampling")
    ref = fam.reference
    out = []
    big_n, big_d = (256, 50) if small else (65536, 5000)
    for dtype in (torch.float32, torch.bfloat16):
        out.append(_normal_case(fam, ref, big_n, big_d, dtype, device, note="bar: >= 85% of write floor"))
    for d in (BLOG_DIMS[:2] if small else BLOG_DIMS):
        out.append(_normal_case(fam, ref, 1024, d, torch.float32, device, note="blog sizes", launch_bound=True))

    n, d, n_elite = (2000, 30, 200) if small else (65536, 1000, 6554)
    samples = torch.randn(n, d, device=device)
    scores = torch.randn(n, device=device)
    mean, std = torch.zeros(d, device=device), torch.ones(d, device=device)
    out.append(Case(
        family="sampling", op="cem_update", shape=f"n={n} d={d} elite={n_elite}", dtype="float32",
        # k=n_elite binds this case's count: cem_iteration's case below rebinds n_elite (until session 44
        # both lambdas read its 410, and the row named 6554)
        ours=lambda x, s, m, sd, k=n_elite: fam.cem_update(x, s, k, m, sd, 0.1, 0.01),
        reference=lambda x, s, m, sd, k=n_elite: ref.cem_update(x, s, k, m, sd, 0.1, 0.01),
        args=(samples, scores, mean, std),
        bytes=n * 4 + n_elite * d * 4 + 4 * d * 4,  # scores, elite rows, old and new mean/std
        note="bar: >= 3x reference",
    ))

    # one CEM iteration (sample, score, refit) on Rastrigin: ours vs the plain-PyTorch loop body
    n, d, n_elite = (500, 20, 50) if small else (4096, 1000, 410)

    def ours_iter(m, sd):
        x = fam.normal(m, sd, n)
        return fam.cem_update(x, ref.rastrigin(x), n_elite, m, sd)

    def ref_iter(m, sd):
        x = ref.normal(m, sd, n)
        return ref.cem_update(x, ref.rastrigin(x), n_elite, m, sd)

    out.append(Case(
        family="sampling", op="cem_iteration", shape=f"n={n} d={d} elite={n_elite}", dtype="float32",
        ours=ours_iter, reference=ref_iter, args=(torch.zeros(d, device=device), torch.ones(d, device=device)),
        bytes=n * d * 4 * 2, note="normal + rastrigin + cem_update", random=True,
    ))

    # the whole loop, 20 iterations on Rastrigin, host time included: ours with and without cuda_graph (a CUDA
    # graph of the refit) against the plain-PyTorch loop; torch.compile of a 20-iteration loop would unroll it
    # (cem_iteration above is the compiled comparison)
    n, d, n_elite, iters = (500, 20, 50, 3) if small else (8192, 1000, 819, 20)
    for cuda_graph in (False, True):
        out.append(Case(
            family="sampling", op=f"cem_minimize{' cuda_graph' if cuda_graph else ''}",
            shape=f"n={n} d={d} elite={n_elite} iters={iters}", dtype="float32",
            ours=lambda m, sd, g=cuda_graph: fam.cem_minimize(ref.rastrigin, m, sd, n, n_elite, iters, cuda_graph=g),
            reference=lambda m, sd: ref.cem_minimize(ref.rastrigin, m, sd, n, n_elite, iters),
            args=(torch.zeros(d, device=device), torch.ones(d, device=device)), compile=False,
            bytes=iters * n * d * 4 * 2, note="the loop: normal + rastrigin + refit per iteration", random=True,
        ))
    return out
