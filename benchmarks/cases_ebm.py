"""Benchmark cases of family `ebm` (sizes from issue 3; see ANCHORS.md for the floors).

On "cuda" the sizes are the issue's; on "cpu" the same cases at smaller sizes (for a
CPU-vs-GPU table of the same work, run the cuda case's shape on cpu by hand)."""
import math

import torch

import loader
try:
    from benchmarks.common import Case
except ImportError:  # run from inside benchmarks/
    from common import Case

FAMILY = "ebm"


def _precision(D, device, dtype=torch.float32):
    g = torch.Generator().manual_seed(D)
    a = torch.randn(D, D, generator=g, dtype=torch.float64)
    return (a @ a.T / D + torch.eye(D, dtype=torch.float64)).to(device, dtype)


def cases(device: str, small: bool = False) -> list[Case]:
    ebm = loader.load(FAMILY)
    ref = ebm.reference
    gpu = device != "cpu"
    f32, size = torch.float32, 4
    out = []

    # ---- energies, scores, langevin_step: memory-bound, B = 2^21, D = 16
    B, D = (2 ** 21, 16) if gpu else (2 ** 15, 16)
    shape = f"B={B} D={D}"
    x = torch.randn(B, D, device=device)
    mean, prec = torch.randn(D, device=device), _precision(D, device)
    xbytes = B * D * size
    out.append(Case(FAMILY, "gaussian_score", shape, "float32", lambda x: ebm.gaussian_score(x, mean, prec),
                    lambda x: ref.gaussian_score(x, mean, prec), (x,), bytes=2 * xbytes, flops=2 * B * D * D))
    out.append(Case(FAMILY, "gaussian_energy", shape, "float32", lambda x: ebm.gaussian_energy(x, mean, prec),
                    lambda x: ref.gaussian_energy(x, mean, prec), (x,), bytes=xbytes + B * size,
                    flops=2 * B * D * D))
    out.append(Case(FAMILY, "gaussian_score (vs autograd of the energy)", shape, "float32",
                    lambda x: ebm.gaussian_score(x, mean, prec),
                    lambda x: ref.autograd_score(ref.gaussian_energy, x, mean, prec), (x,), bytes=2 * xbytes,
                    compile=False, note="reference: autograd of the reference energy, as EBM libraries do"))
    # mean and precision converted once, outside the timed calls (until session 32 two conversion
    # kernels ran in every call of ours, eager's and torch.compile's)
    xh, mean_h, prec_h = x.to(torch.bfloat16), mean.bfloat16(), prec.bfloat16()
    out.append(Case(FAMILY, "gaussian_score", shape, "bfloat16", lambda x: ebm.gaussian_score(x, mean_h, prec_h),
                    lambda x: ref.gaussian_score(x, mean_h, prec_h), (xh,), bytes=xbytes))
    for model in ["double_well", "harmonic", "rosenbrock", "rastrigin", "ackley"]:
        e_ours, s_ours = getattr(ebm, f"{model}_energy"), getattr(ebm, f"{model}_score")
        out.append(Case(FAMILY, f"{model}_energy", shape, "float32", e_ours, ref.ENERGIES[model], (x,),
                        bytes=xbytes + B * size))
        out.append(Case(FAMILY, f"{model}_score", shape, "float32", s_ours, ref.SCORES[model], (x,),
                        bytes=2 * xbytes))
    g = torch.randn_like(x)
    out.append(Case(FAMILY, "langevin_step", shape, "float32", lambda x, g: ebm.langevin_step(x, g, 0.01),
                    lambda x, g: ref.langevin_step(x, g, 0.01), (x, g), bytes=3 * xbytes,
                    random=True, note="x − η·grad + √(2η)·ε, noise drawn in the kernel"))
    out.append(Case(FAMILY, "langevin_step (Gaussian, fused: langevin_chain n_steps=1)", shape, "float32",
                    lambda x: ebm.langevin_chain(x, "gaussian", 1, 0.01, mean=mean, precision=prec),
                    lambda x: ref.langevin_step(x, -ref.gaussian_score(x, mean, prec), 0.01), (x,),
                    bytes=2 * xbytes, flops=2 * B * D * D, random=True,
                    note="score + noise + update in one pass (ANCHORS: one Langevin step, Gaussian)"))

    # ---- chains: compute-bound. flops counts the score's matrix-vector product and the update.
    n_steps, eta = 100, 0.01
    for D, B in ([(16, 65536), (256, 65536), (1024, 16384)] if gpu else [(16, 4096), (256, 256)]):
        shape = f"B={B} D={D} steps={n_steps}"
        x0 = torch.randn(B, D, device=device)
        chain_mean, chain_prec = torch.randn(D, device=device), _precision(D, device)
        flops = n_steps * B * (2 * D * D + 4 * D)
        chain = lambda x, mean=chain_mean, prec=chain_prec: ebm.langevin_chain(x, "gaussian", n_steps, eta, mean=mean,
                                                                                 precision=prec)
        out.append(Case(FAMILY, "langevin_chain gaussian (vs eager analytic loop)", shape, "float32", chain,
                        lambda x, mean=chain_mean, prec=chain_prec: ref.langevin_chain(
                            x, lambda y: ref.gaussian_score(y, mean, prec), n_steps, eta),
                        (x0,), bytes=2 * B * D * size, flops=flops, compile=False, random=True,
                        note="one launch for D <= 64; addmm + fused update per step above"))
        out.append(Case(FAMILY, "langevin_chain gaussian (vs autograd loop)", shape, "float32", chain,
                        lambda x, mean=chain_mean, prec=chain_prec: ref.langevin_chain_autograd(
                            x, lambda y: ref.gaussian_energy(y, mean, prec), n_steps, eta),
                        (x0,), bytes=2 * B * D * size, flops=flops, compile=False, random=True,
                        note="reference: autograd score every step (how EBM libraries do it)"))
    D, B = (16, 65536) if gpu else (16, 2048)
    x0 = torch.randn(B, D, device=device)
    hmc_mean, hmc_prec = torch.randn(D, device=device), _precision(D, device)
    n_leapfrog = 10
    out.append(Case(FAMILY, "hmc_chain gaussian (vs eager loop)", f"B={B} D={D} steps={n_steps} L={n_leapfrog}",
                    "float32",
                    lambda x: ebm.hmc_chain(x, "gaussian", n_steps, 0.1, n_leapfrog, mean=hmc_mean,
                                            precision=hmc_prec),
                    lambda x: ref.hmc_chain(x, lambda y: ref.gaussian_energy(y, hmc_mean, hmc_prec),
                                            lambda y: ref.gaussian_score(y, hmc_mean, hmc_prec), n_steps, 0.1,
                                            n_leapfrog),
                    (x0,), bytes=2 * B * D * size, flops=n_steps * (n_leapfrog + 1) * B * (2 * D * D + 4 * D),
                    compile=False, random=True))
    out.append(Case(FAMILY, "langevin_chain double_well (vs eager analytic loop)", f"B={B} D={D} steps={n_steps}",
                    "float32", lambda x: ebm.langevin_chain(x, "double_well", n_steps, eta),
                    lambda x: ref.langevin_chain(x, ref.double_well_score, n_steps, eta), (x0,),
                    bytes=2 * B * D * size, compile=False, random=True))
    if gpu:  # the 2-D toy EBMs' widths: one Philox call serves 4 / D steps of a row (session 48)
        B = 65536
        for D in (1, 2):
            x0 = torch.randn(B, D, device=device)
            out.append(Case(FAMILY, "langevin_chain double_well (vs eager analytic loop)",
                            f"B={B} D={D} steps={n_steps}", "float32",
                            lambda x: ebm.langevin_chain(x, "double_well", n_steps, eta),
                            lambda x: ref.langevin_chain(x, ref.double_well_score, n_steps, eta), (x0,),
                            bytes=2 * B * D * size, compile=False, random=True))
            out.append(Case(FAMILY, "hmc_chain double_well (vs eager loop)",
                            f"B={B} D={D} steps={n_steps} L={n_leapfrog}", "float32",
                            lambda x: ebm.hmc_chain(x, "double_well", n_steps, 0.1, n_leapfrog),
                            lambda x: ref.hmc_chain(x, ref.double_well_energy, ref.double_well_score, n_steps, 0.1,
                                                    n_leapfrog),
                            (x0,), bytes=2 * B * D * size, compile=False, random=True))
    return out
