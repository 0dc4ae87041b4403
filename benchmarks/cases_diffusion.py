"""Benchmark cases for the `diffusion` family: the sizes issue 5 names.

- ddpm_step at 256x16x2048 float32 (bar: >= 85% of the floor) with noise drawn in the kernel
  (floor: read model_output and sample, write the result) and with noise given (one more read);
- ddpm_step at 1x16x2 (launch-bound): ours is one step replayed from a captured CUDA graph;
- ddim_step at 256x16x2048;
- conv1d_gn_mish at B=1 256->256 L=16 (bar: >= 2x eager), B=1 512->512 L=8 and 1024->1024 L=4 (the
  U-Net's deeper levels) and B=256 256->512 L=16 (bar: no slower than eager, which runs cuDNN).
"""
import torch

import loader

try:
    from benchmarks.common import Case
except ImportError:  # run from inside benchmarks/
    from common import Case

FAMILY = "diffusion"


def _step_cases(D, R, device, small):
    T = 1000
    cases = []
    sched = D.ddpm_schedule(T, "linear", device=device)
    B, C, L = (8, 16, 64) if small else (256, 16, 2048)
    m, x, z = (torch.randn(B, C, L, device=device) for _ in range(3))
    t = torch.randint(1, T, (B,), device=device)  # one timestep per row, read on the device
    n = m.numel() * 4
    cases.append(Case(FAMILY, "ddpm_step", f"{B}x{C}x{L} noise drawn in-kernel, per-row t", "float32",
                      ours=lambda m, t, x, s: D.ddpm_step(m, t, x, s),
                      reference=lambda m, t, x, s: R.ddpm_step(m, t, x, s),
                      args=(m, t, x, sched), bytes=3 * n, random=True,
                      note="floor: read model_output + sample, write out (the reference also writes and reads randn)"))
    cases.append(Case(FAMILY, "ddpm_step", f"{B}x{C}x{L} noise given, per-row t", "float32",
                      ours=lambda m, t, x, s, z: D.ddpm_step(m, t, x, s, z),
                      reference=lambda m, t, x, s, z: R.ddpm_step(m, t, x, s, z),
                      args=(m, t, x, sched, z), bytes=4 * n))
    cases.append(Case(FAMILY, "ddim_step", f"{B}x{C}x{L} eta=0, per-row t", "float32",
                      ours=lambda m, t, t_prev, x, s: D.ddim_step(m, t, t_prev, x, s),
                      reference=lambda m, t, t_prev, x, s: R.ddim_step(m, t, t_prev, x, s),
                      args=(m, t, t - 1, x, sched), bytes=3 * n))  # t - 1 made once, not in the timed calls

    # Launch-bound: batch 1, one step. Ours replays a graph captured around one call.
    sched100 = D.ddpm_schedule(100, "squaredcos_cap_v2", device=device)
    sm, sx = torch.randn(1, 16, 2, device=device), torch.randn(1, 16, 2, device=device)
    st = torch.tensor(50, device=device)
    ours, note = (lambda: D.ddpm_step(sm, st, sx, sched100)), "eager call (no CUDA here)"
    if device == "cuda":
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            D.ddpm_step(sm, st, sx, sched100)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            D.ddpm_step(sm, st, sx, sched100)
        ours, note = graph.replay, "ours: time per step replayed from a captured CUDA graph (fresh noise each replay)"
    cases.append(Case(FAMILY, "ddpm_step", "1x16x2 (launch-bound)", "float32", ours=lambda: ours(),
                      reference=lambda: R.ddpm_step(sm, st, sx, sched100), args=(), bytes=3 * sm.numel() * 4,
                      note=note, random=True, launch_bound=True, extra={"cuda_graph": device == "cuda"}))
    return cases


def _conv_cases(D, R, device, small):
    cases = []
    big = 8 if small else 256  # the large-batch cases' batch
    # B=1 at the U-Net's other levels too (512 channels at L=8, 1024 at L=4): the CUDA graph of the
    # example replays them all.
    unet = [] if small else [(1, 512, 512, 8, torch.float32), (1, 1024, 1024, 4, torch.float32)]
    for B, cin, cout, L, dtype in [(1, 256, 256, 16, torch.float32), *unet, (big, 256, 2 * 256, 16, torch.float32),
                                   (big, 256, 2 * 256, 16, torch.bfloat16)]:
        K, G = 5, 8
        x = torch.randn(B, cin, L, device=device, dtype=dtype)
        w = torch.randn(cout, cin, K, device=device, dtype=dtype) * (cin * K) ** -0.5
        b, gw, gb = (torch.randn(cout, device=device, dtype=dtype) for _ in range(3))
        size = torch.finfo(dtype).bits // 8
        moved = (x.numel() + w.numel() + 3 * cout + B * cout * L) * size
        cases.append(Case(FAMILY, "conv1d_gn_mish", f"B={B} C={cin}->{cout} L={L} K={K} G={G}", str(dtype)[6:],
                          ours=lambda *a, G=G: D.conv1d_gn_mish(*a, G),
                          reference=lambda *a, G=G: R.conv1d_gn_mish(*a, G),
                          args=(x, w, b, gw, gb), bytes=moved, flops=2 * B * cout * L * cin * K, launch_bound=B == 1,
                          note="eager/compile convolutions follow torch.backends.cudnn.allow_tf32 (default on)"))
    return cases


def cases(device: str, small: bool = False) -> list[Case]:
    """small: sizes that run in moments on a CPU (examples/quickstart.py)."""
    D = loader.load(FAMILY)
    return _step_cases(D, D.reference, device, small) + _conv_cases(D, D.reference, device, small)
