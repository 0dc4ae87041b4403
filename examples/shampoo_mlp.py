"""Train a small MLP on a synthetic regression task with Adam and with this family's Shampoo;
save loss against step and against wall time, print time per step.

    python examples/shampoo_mlp.py                 # CPU: small, ~a minute
    python examples/shampoo_mlp.py --device cuda   # GPU: width 1024
"""
import argparse
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import loader  # noqa: E402


def make_task(n, dim, device, seed=0):
    """y = a fixed random 2-layer teacher network of x, plus a little noise (made here, no downloads)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=gen)
    W1, W2 = torch.randn(dim, dim, generator=gen) / dim ** 0.5, torch.randn(dim, 8, generator=gen) / dim ** 0.5
    y = torch.tanh(x @ W1) @ W2 + 0.01 * torch.randn(n, 8, generator=gen)
    return x.to(device), y.to(device)


def make_model(dim, width, device, seed=1):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(dim, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 8)).to(device)


def train(name, make_opt, x, y, args):
    model = make_model(x.shape[1], args.width, x.device)
    opt = make_opt(model.parameters())
    losses, times = [], []
    sync = torch.cuda.synchronize if x.is_cuda else (lambda: None)
    gen = torch.Generator().manual_seed(2)
    sync()
    start = time.perf_counter()
    for _ in range(args.steps):
        idx = torch.randint(0, x.shape[0], (args.batch,), generator=gen).to(x.device)
        loss = nn.functional.mse_loss(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        sync()
        times.append(time.perf_counter() - start)
    losses = torch.stack(losses).cpu().tolist()
    first = len(times) // 5  # timed from the end of step `first` (warm-up) to the end of the last
    per_step = (times[-1] - times[first]) / max(1, len(times) - 1 - first) * 1e3
    print(f"{name:22s} final loss {sum(losses[-20:]) / 20:.4f}   {per_step:.2f} ms/step")
    return losses, times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--width", type=int, default=None, help="hidden width (default 128 on CPU, 1024 on GPU)")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--update-freq", type=int, default=10)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"))
    args = parser.parse_args()
    gpu = args.device.startswith("cuda")
    args.width = args.width or (1024 if gpu else 128)
    args.steps = args.steps or (1000 if gpu else 300)
    linalg = loader.load("linalg")
    x, y = make_task(20000, 32, args.device)
    runs = {
        "Adam": lambda p: torch.optim.Adam(p, lr=1e-3),
        f"Shampoo (freq {args.update_freq})": lambda p: linalg.Shampoo(p, lr=1e-3, update_freq=args.update_freq),
    }
    results = {name: train(name, make, x, y, args) for name, make in runs.items()}

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for name, (losses, times) in results.items():
        axes[0].plot(losses, label=name)
        axes[1].plot(times, losses, label=name)
    for ax, xlabel in zip(axes, ("step", "wall time (s)")):
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("training loss (MSE)")
        ax.legend()
    fig.suptitle(f"MLP 4 layers width {args.width}, batch {args.batch}, {args.device}")
    fig.tight_layout()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "shampoo_mlp.png", dpi=120)
    print(f"saved {out / 'shampoo_mlp.png'}")


if __name__ == "__main__":
    main()
