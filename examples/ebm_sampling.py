"""Sample a 2-D double well and a correlated 2-D Gaussian with langevin_chain and hmc_chain.

Saves a PNG of the sample histograms over the true density, and prints the time of our
chain against the autograd-per-step Langevin loop a typical EBM library runs.

    python examples/ebm_sampling.py                 # GPU if there is one, else CPU (smaller)
    python examples/ebm_sampling.py --device cpu --out /tmp/ebm
"""
import argparse
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import loader  # noqa: E402


def timed(fn, device, repeats=3):
    """Median seconds of fn() (synchronizing on CUDA), after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def milliseconds(seconds: float) -> str:
    """seconds in ms to 3 significant digits, without an exponent (0.116, 32.9, 1234)."""
    ms = seconds * 1e3
    return f"{ms:.{max(0, 2 - math.floor(math.log10(ms))) if ms > 0 else 0}f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"))
    parser.add_argument("--chains", type=int, default=None, help="parallel chains (default: 65536 GPU, 8192 CPU)")
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args(argv)
    device = args.device
    chains = args.chains or (65536 if device == "cuda" else 8192)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)

    ebm = loader.load("ebm")
    ref = ebm.reference

    # The two targets: E(x) = h·Σ(xᵢ² − 1)² and ½(x − μ)ᵀP(x − μ) with correlation 0.8.
    well = dict(barrier_height=1.0, b=1.0)
    cov = torch.tensor([[1.0, 0.8], [0.8, 1.0]])
    gauss = dict(mean=torch.tensor([0.5, -0.5], device=device), precision=torch.linalg.inv(cov).to(device))
    targets = [("double well", "double_well", well), ("correlated Gaussian", "gaussian", gauss)]

    samples = {}
    for title, model, params in targets:
        x0 = torch.randn(chains, 2, device=device)
        samples[(title, "Langevin")] = ebm.langevin_chain(x0, model, args.steps, 0.01, **params)
        x, accept = ebm.hmc_chain(x0, model, args.steps // 5, 0.15, 8, **params)
        samples[(title, "HMC")] = x
        print(f"{title:20s} HMC acceptance {accept.mean().item():.3f}")

    # Time: our one-launch chain vs the autograd loop of a typical EBM library, same work.
    x0 = torch.randn(chains, 2, device=device)
    energy_fn = lambda y: ref.double_well_energy(y, **well)  # noqa: E731
    ours = timed(lambda: ebm.langevin_chain(x0, "double_well", 100, 0.01, **well), device)
    autograd_steps = 100 if device == "cuda" else 20
    theirs = timed(lambda: ref.langevin_chain_autograd(x0, energy_fn, autograd_steps, 0.01), device, repeats=1)
    theirs *= 100 / autograd_steps
    # Say when the loop's time is scaled up from fewer steps. Times to 3 significant digits, so that the printed
    # times give the printed ratio: the CPU chain takes ~0.1 ms since session 47, which 2 decimals rounded by 4%.
    scaled = f" (from {autograd_steps} steps)" if autograd_steps != 100 else ""
    print(f"100 Langevin steps, {chains} chains, D=2 on {device}: langevin_chain {milliseconds(ours)} ms, "
          f"autograd loop {milliseconds(theirs)} ms{scaled} ({theirs / ours:.1f}x)")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 9))
    grid = torch.linspace(-3, 3, 301)
    gx, gy = torch.meshgrid(grid, grid, indexing="xy")
    points = torch.stack([gx.reshape(-1), gy.reshape(-1)], 1).double()
    for row, (title, model, params) in enumerate(targets):
        cpu_params = {k: (v.double().cpu() if torch.is_tensor(v) else v) for k, v in params.items()}
        density = torch.exp(-ref.ENERGIES[model](points, **cpu_params)).reshape(gx.shape)
        for col, sampler in enumerate(["Langevin", "HMC"]):
            ax = axes[row, col]
            xs = samples[(title, sampler)].cpu()
            ax.hist2d(xs[:, 0].numpy(), xs[:, 1].numpy(), bins=80, range=[[-3, 3], [-3, 3]], cmap="Blues",
                      density=True)
            ax.contour(gx.numpy(), gy.numpy(), density.numpy(), levels=6, colors="red", linewidths=0.8)
            ax.set_title(f"{title}: {sampler} ({len(xs)} chains)")
            ax.set_aspect("equal")
    fig.suptitle("samples (histogram) over the true density exp(−E) (red contours)")
    fig.tight_layout()
    path = out_dir / "ebm_sampling.png"
    fig.savefig(path, dpi=110)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
