"""Family `ebm` in plain PyTorch: the spec, the test oracle and the benchmark baselines.

Scores are −∇ₓE. `<model>_score` here is the closed form (the "eager analytic" baseline);
`autograd_score(energy, x, ...)` is how an EBM library gets it (the test oracle).
"""
import math

import torch


# ---------------------------------------------------------------- energies (B, D) -> (B,)

def gaussian_energy(x, mean, precision):
    d = x - mean
    return 0.5 * ((d @ precision) * d).sum(-1)


def double_well_energy(x, barrier_height=2.0, b=1.0):
    return barrier_height * ((x * x - b * b) ** 2).sum(-1)


def harmonic_energy(x, k=1.0):
    return 0.5 * k * (x * x).sum(-1)


def rosenbrock_energy(x, a=1.0, b=100.0):
    head, tail = x[:, :-1], x[:, 1:]
    return (b * (tail - head * head) ** 2 + (a - head) ** 2).sum(-1)


def rastrigin_energy(x, a=10.0):
    return a * x.shape[-1] + (x * x - a * torch.cos(2 * math.pi * x)).sum(-1)


def _rms(x, keepdim=False):
    """sqrt(mean(x²)) over the last dimension, with derivative 0 where it is 0 (Ackley's minimum, or x²
    underflowing): the subgradient the score takes there. A plain sqrt's infinite derivative times 0 made
    every derivative of the rows at 0 NaN, even rows the loss never used (session 40's review)."""
    s = (x * x).mean(-1, keepdim=keepdim)
    positive = s > 0
    return torch.where(positive, torch.sqrt(torch.where(positive, s, torch.ones_like(s))), torch.zeros_like(s))


def ackley_energy(x, a=20.0, b=0.2, c=2 * math.pi):
    """a − a·e^(−b·r) + e − e^(mean cos cx), with e^(mean cos cx) = e·e^(−2·mean sin²(cx/2)): both differences as
    expm1, which keep their digits near the minimum (the plain form cancelled ~22.7 against ~22.7 there)."""
    r = _rms(x)
    return -a * torch.expm1(-b * r) - math.e * torch.expm1(-2 * torch.sin(c * x / 2).square().mean(-1))


# ---------------------------------------------------------------- closed-form scores (B, D) -> (B, D)

def gaussian_score(x, mean, precision):
    return -(x - mean) @ (0.5 * (precision + precision.T))


def double_well_score(x, barrier_height=2.0, b=1.0):
    return -4 * barrier_height * x * (x * x - b * b)


def harmonic_score(x, k=1.0):
    return -k * x


def rosenbrock_score(x, a=1.0, b=100.0):
    head, tail = x[:, :-1], x[:, 1:]
    u = tail - head * head
    g = torch.zeros_like(x)
    g[:, :-1] += -4 * b * head * u - 2 * (a - head)
    g[:, 1:] += 2 * b * u
    return -g


def rastrigin_score(x, a=10.0):
    return -(2 * x + 2 * math.pi * a * torch.sin(2 * math.pi * x))


def ackley_score(x, a=20.0, b=0.2, c=2 * math.pi):
    D = x.shape[-1]
    r = _rms(x, keepdim=True)
    r_or_1 = torch.where(r > 0, r, torch.ones_like(r))  # the branch not taken must not divide by 0 (its gradient)
    c0 = torch.where(r > 0, a * b * torch.exp(-b * r) / (D * r_or_1), torch.zeros_like(r))
    c1 = torch.exp(torch.cos(c * x).mean(-1, keepdim=True)) * c / D
    return -(c0 * x + c1 * torch.sin(c * x))


ENERGIES = {"gaussian": gaussian_energy, "double_well": double_well_energy, "harmonic": harmonic_energy,
            "rosenbrock": rosenbrock_energy, "rastrigin": rastrigin_energy, "ackley": ackley_energy}
SCORES = {"gaussian": gaussian_score, "double_well": double_well_score, "harmonic": harmonic_score,
          "rosenbrock": rosenbrock_score, "rastrigin": rastrigin_score, "ackley": ackley_score}


def autograd_score(energy, x, *args, **kwargs):
    """−∇ₓ energy(x) by autograd, the way EBM libraries compute it."""
    with torch.enable_grad():
        x = x.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(energy(x, *args, **kwargs).sum(), x)
    return -g


# ---------------------------------------------------------------- samplers

def _clamp(x, clamp):
    if clamp is None:
        return x
    lo, hi = (-clamp, clamp) if isinstance(clamp, (int, float)) else clamp
    return x.clamp(lo, hi)


def langevin_step(x, grad, step_size, noise_scale=1.0, clamp=None, noise=None):
    """x − η·grad + noise_scale·√(2η)·ε, ε ~ N(0, I) (or the given noise)."""
    noise = torch.randn_like(x) if noise is None else noise
    return _clamp(x - step_size * grad + noise_scale * math.sqrt(2 * step_size) * noise, clamp)


def langevin_chain(x, score, n_steps, step_size, noise_scale=1.0, thin=0, clamp=None):
    """Eager loop with an analytic score(x) -> (B, D). Returns x, or (x, trajectory) when thin > 0."""
    saved = []
    for step in range(n_steps):
        x = langevin_step(x, -score(x), step_size, noise_scale, clamp)
        if thin and (step + 1) % thin == 0:
            saved.append(x)
    return (x, torch.stack(saved) if saved else x.new_empty((0, *x.shape))) if thin else x


def langevin_chain_autograd(x, energy, n_steps, step_size, noise_scale=1.0):
    """Eager loop with the score by autograd of energy(x) -> (B,) every step (how EBM libraries do it)."""
    for _ in range(n_steps):
        x = langevin_step(x, -autograd_score(energy, x), step_size, noise_scale).detach()
    return x


def hmc_chain(x, energy, score, n_steps, step_size, n_leapfrog):
    """Eager HMC with Metropolis correction. Returns (x, acceptance rate per chain)."""
    accepted = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
    for _ in range(n_steps):
        p = torch.randn_like(x)
        h0 = energy(x) + 0.5 * (p * p).sum(-1)
        xn = x
        pn = p + 0.5 * step_size * score(xn)
        for leap in range(n_leapfrog):
            xn = xn + step_size * pn
            pn = pn + (0.5 if leap + 1 == n_leapfrog else 1.0) * step_size * score(xn)
        h1 = energy(xn) + 0.5 * (pn * pn).sum(-1)
        accept = torch.log(torch.rand_like(h0)) < h0 - h1
        x = torch.where(accept[:, None], xn, x)
        accepted += accept
    return x, accepted / max(n_steps, 1)
