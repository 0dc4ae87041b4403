"""Cross-entropy method on Rastrigin and Rosenbrock in d=1000 (GPU) or d=100 (CPU).

Prints the best value per iteration, times one iteration of loader.sampling's CEM (on the GPU also with
cuda_graph=True, which replays the loop's work after fn as one CUDA graph) against the same loop in plain
PyTorch (reference.py), and saves a convergence plot. Uses the `ebm` family's energies as objectives when
that family exists, else the plain-PyTorch ones in sampling's reference.py.

    python examples/cem_optimize.py [--out examples/out] [--device cuda] [--iters 150]
"""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

import loader  # noqa: E402


def objectives():
    ref = loader.sampling.reference
    if "ebm" in loader.families():
        ebm = loader.ebm
        if hasattr(ebm, "rastrigin_energy") and hasattr(ebm, "rosenbrock_energy"):
            return {"rastrigin (ebm)": ebm.rastrigin_energy, "rosenbrock (ebm)": ebm.rosenbrock_energy}
    return {"rastrigin": ref.rastrigin, "rosenbrock": ref.rosenbrock}


def time_per_iter(run, device, repeats=3):
    run()  # warm-up (and builds)
    best = float("inf")
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        run()
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="examples/out")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--iters", type=int, default=None)
    parser.add_argument("--dim", type=int, default=None)
    args = parser.parse_args()
    device = args.device
    gpu = device == "cuda"
    d = args.dim or (1000 if gpu else 100)
    n_samples = 8192 if gpu else 1000
    n_elite = n_samples // 10
    iters = args.iters or (200 if gpu else 60)
    sampling = loader.sampling
    ref = sampling.reference
    print(f"device {device}: d={d}, population {n_samples}, elite {n_elite}, {iters} iterations")

    histories = {}
    for name, fn in objectives().items():
        torch.manual_seed(0)
        start_mean = torch.full((d,), 2.0, device=device) if "rastrigin" in name else torch.zeros(d, device=device)
        start_std = torch.full((d,), 2.0, device=device)
        cem = dict(smoothing=0.1, min_std=1e-3)
        res = sampling.cem_minimize(fn, start_mean, start_std, n_samples, n_elite, iters, **cem)
        hist = res.history.cpu()
        histories[name] = hist
        print(f"\n{name}: best value per iteration")
        for it in range(0, iters, max(1, iters // 20)):
            print(f"  iter {it:4d}  best {hist[it].item():14.4f}")
        print(f"  final  best {res.best_value.item():.4f}   |mean - optimum| max "
              f"{(res.mean - (0.0 if 'rastrigin' in name else 1.0)).abs().max().item():.3f}")

        # whole runs of `iters` iterations, as above: cuda_graph's capture is paid once per run
        def run_ours(**options):
            return sampling.cem_minimize(fn, start_mean, start_std, n_samples, n_elite, iters, **cem, **options)

        ours = time_per_iter(run_ours, device) / iters
        plain = time_per_iter(lambda: ref.cem_minimize(fn, start_mean, start_std, n_samples, n_elite, iters, **cem),
                              device) / iters
        line = f"  time per iteration: jitkernels {ours * 1e3:.3f} ms ({plain / ours:.2f}x)"
        if gpu:
            graphed = time_per_iter(lambda: run_ours(cuda_graph=True), device) / iters
            line += f", with cuda_graph=True {graphed * 1e3:.3f} ms ({plain / graphed:.2f}x)"
        print(f"{line}; plain PyTorch {plain * 1e3:.3f} ms")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, hist in histories.items():
        ax.semilogy(hist.clamp_min(1e-8).numpy(), label=name)
    ax.set_xlabel("iteration")
    ax.set_ylabel("best objective in the population")
    ax.set_title(f"CEM, d={d}, population {n_samples}, elite {n_elite} ({device})")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = out / "cem_convergence.png"
    fig.savefig(path, dpi=120)
    print(f"\nsaved {path}")


if __name__ == "__main__":
    main()
