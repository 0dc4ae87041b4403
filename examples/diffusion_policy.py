"""Diffusion-policy action sampling: a conditional 1-D U-Net (random weights) denoised by DDPM,
timed four ways.

    python examples/diffusion_policy.py                    # GPU if present: 100 steps, all four modes
    python examples/diffusion_policy.py --device cpu       # CPU: eager and ours, 4 steps

The U-Net follows diffusion policy's ConditionalUnet1D: residual blocks of Conv1d + GroupNorm + Mish
with FiLM conditioning on the diffusion step and an observation feature, down dims 256/512/1024,
kernel 5, 8 groups, horizon 16, action dim 2. Modes:
  eager    PyTorch modules + the reference DDPM step (reference.py), one Python call per op
  compile  the same denoising step under torch.compile(mode="reduce-overhead") (CUDA only)
  ours     Conv1d+GroupNorm+Mish -> conv1d_gn_mish, scheduler -> ddpm_step (timesteps on the device)
  graph    ours, with the whole denoising loop captured in one CUDA graph: copy_ the initial noise
           and condition into static buffers, replay() (CUDA only)
All modes first run with the same pre-drawn noise and must agree; timings then use each mode's own
noise (randn for eager/compile, drawn inside the kernel for ours). Convolutions run in full float32
(TF32 off) unless --tf32. Writes diffusion_policy.png (trajectories and timings) to --out.
"""
import argparse
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import loader  # noqa: E402

D = loader.load("diffusion")
R = D.reference


# ---------------------------------------------------------------- the U-Net

class SinusoidalPosEmb(nn.Module):
    def __init__(self, dim):
        super().__init__()
        half = dim // 2
        self.register_buffer("freq", torch.exp(torch.arange(half) * -(math.log(10000) / (half - 1))))

    def forward(self, t):
        emb = t.float()[:, None] * self.freq[None]
        return torch.cat([emb.sin(), emb.cos()], -1)


class Conv1dBlock(nn.Module):
    """Conv1d -> GroupNorm -> Mish; `fused` routes it through conv1d_gn_mish with the same parameters."""
    fused = False

    def __init__(self, cin, cout, kernel_size, n_groups=8):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, kernel_size, padding=kernel_size // 2)
        self.norm = nn.GroupNorm(n_groups, cout)

    def forward(self, x):
        if Conv1dBlock.fused:
            return D.conv1d_gn_mish(x, self.conv.weight, self.conv.bias, self.norm.weight, self.norm.bias,
                                    self.norm.num_groups, eps=self.norm.eps)
        return F.mish(self.norm(self.conv(x)))


class ConditionalResidualBlock1D(nn.Module):
    def __init__(self, cin, cout, cond_dim, kernel_size, n_groups):
        super().__init__()
        self.blocks = nn.ModuleList([Conv1dBlock(cin, cout, kernel_size, n_groups),
                                     Conv1dBlock(cout, cout, kernel_size, n_groups)])
        self.cond_encoder = nn.Sequential(nn.Mish(), nn.Linear(cond_dim, 2 * cout))  # FiLM scale and bias
        self.cout = cout
        self.residual = nn.Conv1d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, cond):
        out = self.blocks[0](x)
        film = self.cond_encoder(cond).unsqueeze(-1)
        out = torch.addcmul(film[:, self.cout:], film[:, :self.cout], out)  # scale * out + bias, one kernel
        out = self.blocks[1](out)
        return out + self.residual(x)


class ConditionalUnet1D(nn.Module):
    def __init__(self, input_dim=2, global_cond_dim=64, step_embed_dim=256, down_dims=(256, 512, 1024),
                 kernel_size=5, n_groups=8):
        super().__init__()
        dsed = step_embed_dim
        self.step_encoder = nn.Sequential(SinusoidalPosEmb(dsed), nn.Linear(dsed, 4 * dsed), nn.Mish(),
                                          nn.Linear(4 * dsed, dsed))
        cond_dim = dsed + global_cond_dim
        all_dims = [input_dim, *down_dims]
        in_out = list(zip(all_dims[:-1], all_dims[1:]))

        def res(a, b):
            return ConditionalResidualBlock1D(a, b, cond_dim, kernel_size, n_groups)

        self.down = nn.ModuleList()
        for i, (din, dout) in enumerate(in_out):
            last = i >= len(in_out) - 1
            self.down.append(nn.ModuleList([res(din, dout), res(dout, dout),
                                            nn.Identity() if last else nn.Conv1d(dout, dout, 3, 2, 1)]))
        self.mid = nn.ModuleList([res(all_dims[-1], all_dims[-1]), res(all_dims[-1], all_dims[-1])])
        self.up = nn.ModuleList()
        for i, (din, dout) in enumerate(reversed(in_out[1:])):
            last = i >= len(in_out) - 1
            self.up.append(nn.ModuleList([res(2 * dout, din), res(din, din),
                                          nn.Identity() if last else nn.ConvTranspose1d(din, din, 4, 2, 1)]))
        self.final = nn.Sequential(Conv1dBlock(down_dims[0], down_dims[0], kernel_size, n_groups),
                                   nn.Conv1d(down_dims[0], input_dim, 1))

    def forward(self, sample, timestep, global_cond):
        """sample (B, horizon, input_dim); timestep: 0-d or (B,) int tensor; global_cond (B, global_cond_dim)."""
        x = sample.transpose(1, 2)
        feature = torch.cat([self.step_encoder(timestep.expand(sample.shape[0])), global_cond], -1)
        skips = []
        for res1, res2, down in self.down:
            x = res2(res1(x, feature), feature)
            skips.append(x)
            x = down(x)
        for block in self.mid:
            x = block(x, feature)
        for res1, res2, up in self.up:
            x = torch.cat([x, skips.pop()], 1)
            x = up(res2(res1(x, feature), feature))
        return self.final(x).transpose(1, 2)


# ---------------------------------------------------------------- the four modes

def make_modes(model, sched, ts, device):
    """Each mode maps (x_T, cond, noises or None) -> the denoised action chunk."""
    steps = ts.numel()

    def loop(step_fn, x, cond, noises):
        for i in range(steps):
            eps = model(x, ts[i], cond)
            x = step_fn(eps, ts[i], x, sched, None if noises is None else noises[i])
        return x

    def eager(x, cond, noises):
        Conv1dBlock.fused = False
        return loop(R.ddpm_step, x, cond, noises)

    def ours(x, cond, noises):
        Conv1dBlock.fused = True
        return loop(D.ddpm_step, x, cond, noises)

    modes = {"eager": eager, "ours": ours}
    if device.type != "cuda":
        return modes

    def denoise_step(x, t, cond, noise):
        return R.ddpm_step(model(x, t, cond), t, x, sched, noise)

    compiled_step = torch.compile(denoise_step, mode="reduce-overhead")

    def compiled(x, cond, noises):
        Conv1dBlock.fused = False
        for i in range(steps):
            torch.compiler.cudagraph_mark_step_begin()
            # clone: the next replay overwrites the graph's output buffer, which is this step's input
            x = compiled_step(x, ts[i], cond, None if noises is None else noises[i]).clone()
        return x

    graphs = {}  # one captured loop with given noise (the agreement check), one drawing its own

    def graph(x, cond, noises):
        key = noises is not None
        if key not in graphs:
            static = {"x": x.clone(), "cond": cond.clone(), "noises": None if noises is None else noises.clone()}
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm up (cuDNN / allocator) outside the capture
                ours(static["x"], static["cond"], static["noises"])
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                static["out"] = ours(static["x"], static["cond"], static["noises"])
            graphs[key] = (g, static)
        g, static = graphs[key]
        static["x"].copy_(x)
        static["cond"].copy_(cond)
        if noises is not None:
            static["noises"].copy_(noises)
        g.replay()
        return static["out"].clone()

    modes.update({"compile": compiled, "graph": graph})
    return {name: modes[name] for name in ("eager", "compile", "ours", "graph")}


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_mode(fn, args, device, reps):
    fn(*args)  # warm-up (compiles / captures on first use)
    times = []
    for _ in range(reps):
        sync(device)
        start = time.perf_counter()
        fn(*args)
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=None, help="DDPM steps per action chunk (100 GPU, 4 CPU)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--reps", type=int, default=None, help="timed action chunks per mode (10 GPU, 1 CPU)")
    parser.add_argument("--tf32", action="store_true", help="let cuDNN / cuBLAS use TF32 (eager and compile)")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"))
    args = parser.parse_args()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    steps = args.steps or (100 if gpu else 4)
    reps = args.reps or (10 if gpu else 1)
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.manual_seed(0)

    horizon, action_dim, cond_dim = 16, 2, 64
    model = ConditionalUnet1D(action_dim, cond_dim).to(device).eval()
    # diffusion policy's scheduler: T = 100 train timesteps, all used (T = steps for quick runs)
    sched = D.ddpm_schedule(steps, "squaredcos_cap_v2", device=device)
    ts = torch.arange(steps - 1, -1, -1, device=device)  # on the device: read there, no host sync
    print(f"U-Net: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, {steps} DDPM steps, "
          f"batch {args.batch}, device {device} ({torch.cuda.get_device_name(device) if gpu else 'cpu'})")

    x_T = torch.randn(args.batch, horizon, action_dim, device=device)
    cond = torch.randn(args.batch, cond_dim, device=device)
    noises = torch.randn(steps, args.batch, horizon, action_dim, device=device)
    modes = make_modes(model, sched, ts, device)

    with torch.no_grad():
        results = {name: fn(x_T, cond, noises) for name, fn in modes.items()}
        for name, out in results.items():
            err = (out - results["eager"]).abs().max().item()
            print(f"  {name:8s} agrees with eager: max |diff| = {err:.2e}")
            assert err < 1e-3, f"{name} disagrees with eager by {err}"
        timings = {name: time_mode(fn, (x_T, cond, None), device, reps) for name, fn in modes.items()}

    eager_s = timings["eager"]
    print(f"\n{'mode':8s} {'ms / action chunk':>18s} {'ms / step':>10s} {'speedup vs eager':>17s}")
    for name, sec in timings.items():
        print(f"{name:8s} {1e3 * sec:18.2f} {1e3 * sec / steps:10.3f} {eager_s / sec:16.2f}x")
    if gpu:
        speedup = eager_s / timings["graph"]
        print(f"\nbars: ours+graph {speedup:.2f}x eager (bar >= 3.4x: {'met' if speedup >= 3.4 else 'NOT met'}); "
              f"{timings['compile'] / timings['graph']:.2f}x torch.compile (bar > 1: "
              f"{'met' if timings['graph'] < timings['compile'] else 'NOT met'})")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.2))
    for (name, out), marker in zip(results.items(), "os^x"):
        traj = out[0].cpu()
        ax0.plot(traj[:, 0], traj[:, 1], marker=marker, ms=4, alpha=0.7, label=name)
    ax0.set(title=f"denoised action chunk (horizon {horizon}), same noise", xlabel="action dim 0",
            ylabel="action dim 1")
    ax0.legend()
    names = list(timings)
    ax1.bar(names, [1e3 * timings[n] for n in names], color=["0.6", "tab:orange", "tab:blue", "tab:green"][:len(names)])
    for i, n in enumerate(names):
        ax1.text(i, 1e3 * timings[n], f"{eager_s / timings[n]:.1f}x", ha="center", va="bottom")
    ax1.set(title=f"{steps} DDPM steps, batch {args.batch}, {device.type}", ylabel="ms per action chunk")
    fig.tight_layout()
    path = out_dir / "diffusion_policy.png"
    fig.savefig(path, dpi=120)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
