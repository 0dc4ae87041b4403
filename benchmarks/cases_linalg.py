"""Benchmark cases of family `linalg` (sizes from issue 8 and ANCHORS.md)."""
import math

import torch
from torch import nn

import loader
from benchmarks.common import Case


def _spd(n, cond, batch=(), device="cpu", dtype=torch.float32):
    Q, _ = torch.linalg.qr(torch.randn(*batch, n, n, device=device))
    lam = torch.logspace(0, -math.log10(cond), n, device=device)
    A = (Q * lam) @ Q.mT
    return ((A + A.mT) / 2).to(dtype)


def _mlp(width, depth, device):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers[:-1]).to(device)


def _optimizer_step(opt, model, x, y):
    def step():
        opt.zero_grad(set_to_none=False)
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return step


def cases(device: str, small: bool = False) -> list[Case]:
    f = loader.load("linalg")
    ref = f.reference
    small = small or device == "cpu"
    out = []

    # matrix_inverse_root against the eigh route, float32, cond 1e3 (the accuracy bar: rel err <= 1e-3)
    def ours_root(A):
        return f.matrix_inverse_root(A, 4, 1e-6, fallback="never")

    def eigh_root(A):
        return ref.matrix_inverse_root_eigh(A, 4, 1e-6)

    for n, batch in ([(32, ()), (16, (4,))] if small
                     else [(32, ()), (32, (256,)), (64, ()), (256, ()), (1024, ()), (4096, ()), (256, (64,))]):
        A = _spd(n, 1e3, batch, device)
        nb = math.prod(batch)
        # p = 4, default max_cond 1e5 in float32: 8 steps, 28 products of n^3 multiply-adds (float32
        # FLOPs; on CUDA each runs as one bfloat16 GEMM of 6 piece products, 6x as many tensor-core FLOPs)
        steps = 8
        out.append(Case("linalg", "matrix_inverse_root p=4", f"n={n}" + (f" batch={nb}" if batch else ""), "float32",
                        ours_root, eigh_root, (A,), bytes=2 * A.numel() * 4, flops=2 * nb * n ** 3 * (4 * steps - 4),
                        compile=False, note="reference: torch.linalg.eigh route in float32; " + (
                            "CUDA: one kernel, a block per matrix (n <= 64)" if n <= 64 else
                            "flops: float32 products, formed from bf16 pieces on CUDA")))

    # kron, write-bound: the floor is writing the output once
    m, k = (5, 10) if small else (50, 100)
    A, B = torch.randn(m, m, device=device), torch.randn(k, k, device=device)
    out.append(Case("linalg", "kron", f"{m}x{m} (x) {k}x{k}", "float32", f.kron, torch.kron, (A, B),
                    bytes=(m * m * k * k + m * m + k * k) * 4))

    # per-sample gradients of Linear in->out, B samples
    bsz, din, dout = (8, 64, 64) if small else (256, 1024, 1024)
    x, g = torch.randn(bsz, din, device=device), torch.randn(bsz, dout, device=device)
    out.append(Case("linalg", "per_sample_grad_linear", f"B={bsz} {din}->{dout}", "float32",
                    f.per_sample_grad_linear, ref.per_sample_grad_linear, (x, g),
                    bytes=(bsz * dout * din + bsz * dout + bsz * din + bsz * dout) * 4,
                    note="reference: einsum (the vmap route is slower still)"))

    # one optimizer step on a 4-layer MLP, update_freq=1: Shampoo (ours) vs Adam, vs eigh Shampoo
    width, batch = (64, 32) if small else (1024, 256)
    xs, ys = torch.randn(batch, width, device=device), torch.randn(batch, width, device=device)
    steps = {}
    for name, make in (("shampoo", lambda p: f.Shampoo(p, lr=1e-3, update_freq=1)),
                       ("adam", lambda p: torch.optim.Adam(p, lr=1e-3)),
                       ("shampoo_eigh", lambda p: f.Shampoo(p, lr=1e-3, update_freq=1, root_method="eigh"))):
        torch.manual_seed(0)
        model = _mlp(width, 4, device)
        steps[name] = _optimizer_step(make(model.parameters()), model, xs, ys)
    out.append(Case("linalg", "Shampoo step vs Adam", f"MLP 4x{width}, B={batch}", "float32",
                    steps["shampoo"], steps["adam"], compile=False,
                    note="forward+backward+step; reference is torch.optim.Adam"))
    out.append(Case("linalg", "Shampoo step vs eigh Shampoo", f"MLP 4x{width}, B={batch}", "float32",
                    steps["shampoo"], steps["shampoo_eigh"], compile=False,
                    note="reference: same Shampoo with eigh inverse roots"))
    return out
