"""Statistical review of the samplers (session 46, reviewer "stats"): are they mathematically right beyond the
Gaussian tests?

- hmc_chain is Metropolis-adjusted, so a target's exact distribution must stay exactly invariant, whatever the
  target: chains started from the true density (inverse CDF on a quadrature grid, or an exact conditional
  sampler) must still follow it after the chain (Kolmogorov-Smirnov on independent chains, one sample per
  chain). Each KS check fails by chance with probability ALPHA = 1e-4. The tests
  test_the_*_check_passes_plain_hmc_and_catches_* apply the same checks to reference.py's HMC (which must
  pass) and to it with one known bug each (which must fail), so the checks are known to have the power they
  need. (With the CPU kernel's Metropolis test removed, every hmc test of test_ebm.py still passed and these
  failed.)
- langevin_chain is unadjusted: its stationary variance on a harmonic well is exactly
  noise_scale^2 / (k (1 - k eta / 2)), not 1/k; checked at 5 standard errors (chance failure ~6e-7 per check),
  and each case is built so that 1/k would miss by more than 20 standard errors.
- normal: the 32-bit draws' tails beyond 4 sigma, and that consecutive draws, lanes of a Philox call and
  consecutive calls are uncorrelated.
- ddpm_step / ddim_step: given the true x0 (or epsilon, or v) and x_t ~ q(x_t | x0), one step must land on
  q(x_prev | x0) = N(sqrt(abar_prev) x0, 1 - abar_prev) exactly, for every prediction type and eta.
Sizes keep the file at a few seconds on 2 cores.
"""
import math

import numpy as np
import pytest
import torch

import loader

ebm = loader.load("ebm")
sampling = loader.load("sampling")
diffusion = loader.load("diffusion")
eref = ebm.reference

ALPHA = 1e-4  # chance failure rate of one KS check


# ---------------------------------------------------------------- helpers

class Exact1d:
    """A 1-D density exp(-energy) on [lo, hi] by quadrature: its CDF and an inverse-CDF sampler."""

    def __init__(self, energy, lo, hi, n=400001):
        self.grid = np.linspace(lo, hi, n)
        e = energy(torch.from_numpy(self.grid)[:, None]).numpy()
        w = np.exp(-(e - e.min()))
        cdf = np.concatenate([[0.0], np.cumsum((w[1:] + w[:-1]) / 2)])
        self.cdf_grid = cdf / cdf[-1]

    def cdf(self, x):
        return np.interp(np.asarray(x, dtype=np.float64), self.grid, self.cdf_grid)

    def sample(self, n, gen):
        u = torch.rand(n, generator=gen, dtype=torch.float64).numpy()
        return torch.from_numpy(np.interp(u, self.cdf_grid, self.grid))


def ks_pvalue(values, cdf):
    """Kolmogorov-Smirnov p-value of values against a continuous CDF (Stephens' approximation of the
    Kolmogorov distribution, good to a few percent for n >= 100 here)."""
    u = np.sort(np.asarray(cdf(values.double().numpy()), dtype=np.float64))
    n = u.size
    i = np.arange(1, n + 1)
    d = max((i / n - u).max(), (u - (i - 1) / n).max())
    lam = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * d
    p = 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam) for k in range(1, 101))
    return min(max(p, 0.0), 1.0)


def normal_cdf(x, mean=0.0, std=1.0):
    return torch.special.ndtr((torch.as_tensor(x, dtype=torch.float64) - mean) / std).numpy()


def gen(seed):
    return torch.Generator().manual_seed(seed)


MODELS_1D = {  # barrier 5 between the wells; rastrigin's bumps of height 2; ackley's kink at 0
    "double_well": (dict(barrier_height=1.0, b=1.5), -4.0, 4.0, 0.15, 10),
    "rastrigin": (dict(a=1.0), -6.0, 6.0, 0.3, 5),
    "ackley": (dict(a=20.0, b=0.2, c=2 * math.pi), -8.0, 8.0, 0.1, 10),
}


def _exact(model):
    params, lo, hi, _, _ = MODELS_1D[model]
    return Exact1d(lambda x: eref.ENERGIES[model](x, **params), lo, hi)


# ---------------------------------------------------------------- HMC: exact for any target

@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("model", list(MODELS_1D))
def test_hmc_keeps_a_non_gaussian_target_exactly_invariant(model, dtype, seed):
    params, _, _, eps, n_leapfrog = MODELS_1D[model]
    exact, g = _exact(model), gen(seed)
    x0 = exact.sample(40000, g)[:, None].to(dtype)
    assert ks_pvalue(x0[:, 0], exact.cdf) > ALPHA  # the start is the target
    out, accept = ebm.hmc_chain(x0, model, 10, eps, n_leapfrog, generator=g, **params)
    assert 0.3 < accept.mean().item() < 1.0 and (out != x0).double().mean() > 0.9  # the chains moved
    assert ks_pvalue(out[:, 0], exact.cdf) > ALPHA


@pytest.mark.parametrize("seed", [0, 1])
def test_hmc_keeps_rosenbrock_2d_exactly_invariant(seed):
    # exp(-(b (y - x^2)^2 + (a - x)^2)): x ~ N(a, 1/2) and y | x ~ N(x^2, 1/(2b)), sampled exactly
    a, b, g = 1.0, 5.0, gen(seed)
    B = 40000
    x = a + math.sqrt(0.5) * torch.randn(B, generator=g, dtype=torch.float64)
    y = x * x + math.sqrt(0.5 / b) * torch.randn(B, generator=g, dtype=torch.float64)
    out, accept = ebm.hmc_chain(torch.stack([x, y], 1), "rosenbrock", 10, 0.03, 10, generator=g, a=a, b=b)
    assert 0.5 < accept.mean().item() < 1.0
    x1, residual = out[:, 0], (out[:, 1] - out[:, 0] ** 2) * math.sqrt(2 * b)
    assert ks_pvalue(x1, lambda v: normal_cdf(v, a, math.sqrt(0.5))) > ALPHA
    assert ks_pvalue(residual, normal_cdf) > ALPHA
    # independent of each other: a correlation within 5 standard errors of 0 (chance ~6e-7)
    assert abs(np.corrcoef(x1.numpy(), residual.numpy())[0, 1]) < 5 / math.sqrt(B)


def test_hmc_keeps_a_2d_double_well_exactly_invariant():
    params, _, _, eps, n_leapfrog = MODELS_1D["double_well"]
    exact, g = _exact("double_well"), gen(3)
    x0 = torch.stack([exact.sample(40000, g), exact.sample(40000, g)], 1)
    out, accept = ebm.hmc_chain(x0, "double_well", 10, eps, n_leapfrog, generator=g, **params)
    assert 0.3 < accept.mean().item() < 1.0
    for j in range(2):
        assert ks_pvalue(out[:, j], exact.cdf) > ALPHA
    same_well = ((out[:, 0] > 0) == (out[:, 1] > 0)).double()  # the wells of the two coordinates: independent
    assert abs(same_well.mean().item() - 0.5) < 5 * 0.5 / math.sqrt(out.shape[0])


CONVERGENCE = (dict(barrier_height=1.0, b=1.0), 150, 0.2, 5)  # params, n_steps, step_size, n_leapfrog


def test_hmc_converges_to_a_double_well_from_one_point():
    # Fresh momentum every iteration is what lets chains that all start at one point spread over both wells
    # (momentum carried over conserves H, and the 84% of chains with H < the barrier could never cross it:
    # test_the_convergence_check_passes_plain_hmc_and_catches_stale_momentum).
    params, n_steps, eps, n_leapfrog = CONVERGENCE
    exact = Exact1d(lambda x: eref.double_well_energy(x, **params), -4.0, 4.0)
    out, _ = ebm.hmc_chain(torch.ones(20000, 1, dtype=torch.float64), "double_well", n_steps, eps, n_leapfrog,
                           generator=gen(4), **params)
    assert ks_pvalue(out[:, 0], exact.cdf) > ALPHA


def _buggy_hmc(x, model, params, n_steps, eps, n_leapfrog, bug, g):
    """Plain-PyTorch HMC (reference.py's) with one deliberate bug, for the power checks below."""
    energy = lambda y: eref.ENERGIES[model](y, **params)  # noqa: E731
    score = lambda y: eref.SCORES[model](y, **params)  # noqa: E731
    p = torch.randn(x.shape, generator=g, dtype=x.dtype)
    for step in range(n_steps):
        if step > 0 and bug != "stale_momentum":
            p = torch.randn(x.shape, generator=g, dtype=x.dtype)
        h0 = energy(x) + 0.5 * (p * p).sum(-1)
        xn, pn = x, p + 0.5 * eps * score(x)
        for leap in range(n_leapfrog):
            xn = xn + eps * pn
            last = leap + 1 == n_leapfrog
            pn = pn + (0.5 if last and bug != "full_last_kick" else 1.0) * eps * score(xn)
        h1 = energy(xn) + 0.5 * (pn * pn).sum(-1)
        if bug == "kinetic_sign":
            h1 = energy(xn) - 0.5 * (pn * pn).sum(-1) + (p * p).sum(-1)
        accept = torch.log(torch.rand(h0.shape, generator=g, dtype=x.dtype)) < h0 - h1
        if bug == "accept_all":
            accept = torch.ones_like(accept)
        x = torch.where(accept[:, None], xn, x)
        p = torch.where(accept[:, None], pn, -p)  # stale_momentum's carried momentum (negated on a rejection)
    return x


def _single_threaded(fn, *args):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # ~100 small eager ops per step: two threads on a busy machine wait on each other
    try:
        return fn(*args)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("bug", ["none", "accept_all", "full_last_kick", "kinetic_sign"])
def test_the_invariance_check_passes_plain_hmc_and_catches_a_broken_one(bug):
    # The same sizes and check as test_hmc_keeps_a_non_gaussian_target_exactly_invariant: reference.py's HMC
    # passes it, and each bug fails it.
    model = "double_well"
    params, _, _, eps, n_leapfrog = MODELS_1D[model]
    exact, g = _exact(model), gen(0)
    x0 = exact.sample(40000, g)[:, None]
    out = _single_threaded(_buggy_hmc, x0, model, params, 10, eps, n_leapfrog, bug, g)
    p = ks_pvalue(out[:, 0], exact.cdf)
    assert p > ALPHA if bug == "none" else p < ALPHA


@pytest.mark.parametrize("bug", ["none", "stale_momentum"])
def test_the_convergence_check_passes_plain_hmc_and_catches_stale_momentum(bug):
    params, n_steps, eps, n_leapfrog = CONVERGENCE
    exact = Exact1d(lambda x: eref.double_well_energy(x, **params), -4.0, 4.0)
    out = _single_threaded(_buggy_hmc, torch.ones(20000, 1, dtype=torch.float64), "double_well", params, n_steps, eps,
                           n_leapfrog, bug, gen(4))
    p = ks_pvalue(out[:, 0], exact.cdf)
    assert p > ALPHA if bug == "none" else p < ALPHA


def test_hmc_rejection_keeps_the_old_state_and_the_rate_is_per_chain():
    # A step so large that about half the proposals are rejected: after one iteration a chain is either exactly
    # where it was (rate 0) or moved (rate 1); after n iterations the rate is a count / n per chain.
    x = torch.randn(4000, 3, dtype=torch.float64, generator=gen(5))
    out, rate = ebm.hmc_chain(x, "harmonic", 1, 1.0, 3, generator=gen(6), k=1.5)
    moved = (out != x).any(1)
    assert set(rate.tolist()) <= {0.0, 1.0} and torch.equal(moved, rate == 1.0)
    assert 0.1 < rate.mean().item() < 0.9
    # 3 iterations, so that some chains (~30 of 4000 at a rate of 0.8) reject every proposal: with 7, that held
    # for the stream of one seed only (about 0.2 chains expected), and the CPU's stream changed in session 47.
    out, rate = ebm.hmc_chain(x, "harmonic", 3, 1.0, 3, generator=gen(6), k=1.5)
    counts = rate * 3
    assert torch.allclose(counts, counts.round(), atol=1e-12) and rate.shape == (4000,)
    assert (rate == 0).any() and ((rate > 0) & (rate < 1)).any()
    assert torch.equal(out[rate == 0], x[rate == 0])  # never accepted: the start, bit for bit


def test_hmc_accept_rate_is_the_exact_leapfrog_s_expected_acceptance():
    # On ½k x² started at stationarity, every iteration accepts with probability E[min(1, exp(-dH))] over
    # x ~ N(0, 1/k), p ~ N(0, 1), dH the energy error of the symmetric leapfrog (half kick, L drifts and kicks,
    # half kick): 0.976 here, against 0.836 for a full last kick. accept_rate is each chain's fraction, so its
    # mean over chains estimates it; checked at 5 standard errors (chance ~6e-7).
    k, eps, n_leapfrog, B = 1.0, 0.9, 3, 100000
    g = gen(15)
    x = torch.randn(2_000_000, generator=g, dtype=torch.float64) / math.sqrt(k)
    p = torch.randn(2_000_000, generator=g, dtype=torch.float64)
    xn, pn = x, p - 0.5 * eps * k * x
    for leap in range(n_leapfrog):
        xn = xn + eps * pn
        pn = pn - (0.5 if leap + 1 == n_leapfrog else 1.0) * eps * k * xn
    accept = torch.exp(-(0.5 * k * (xn ** 2 - x ** 2) + 0.5 * (pn ** 2 - p ** 2))).clamp(max=1)
    expected, se_expected = accept.mean().item(), accept.std().item() / math.sqrt(accept.numel())
    x0 = torch.randn(B, 1, generator=g, dtype=torch.float64) / math.sqrt(k)
    for dtype in (torch.float64, torch.float32):
        _, rate = ebm.hmc_chain(x0.to(dtype), "harmonic", 10, eps, n_leapfrog, generator=g, k=k)
        se = math.hypot(rate.double().std().item() / math.sqrt(B), se_expected)
        assert abs(rate.double().mean().item() - expected) < 5 * se, (dtype, rate.mean().item(), expected)


# ---------------------------------------------------------------- Langevin: the exact ULA bias

@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("k, eta, noise_scale", [(1.0, 0.2, 1.0), (2.0, 0.4, 1.0), (1.0, 0.2, 0.5), (4.0, 0.3, 1.0)])
def test_langevin_chain_has_the_exact_ula_stationary_variance(dtype, k, eta, noise_scale):
    # ULA on ½k x²: x <- (1 - k eta) x + s sqrt(2 eta) z has variance s² / (k (1 - k eta / 2)) at stationarity.
    # Started there, it stays there; 1/k (the target's) would be more than 20 standard errors away.
    v = noise_scale ** 2 / (k * (1 - k * eta / 2))
    B, D = 100000, 2
    g = gen(7)
    x0 = (math.sqrt(v) * torch.randn(B, D, generator=g, dtype=torch.float64)).to(dtype)
    out = ebm.langevin_chain(x0, "harmonic", 20, eta, noise_scale, generator=g, k=k).double()
    se = v * math.sqrt(2 / (B * D))
    assert abs((noise_scale ** 2 / k) - v) > 20 * se  # the check can tell ULA's bias from none
    assert abs((out ** 2).mean().item() - v) < 5 * se
    assert abs(out.mean().item()) < 5 * math.sqrt(v / (B * D))


def test_langevin_chain_wide_gaussian_path_has_the_exact_ula_variance():
    # Gaussian rows wider than 64 take the matrix-product path on the CPU: the same exact variance.
    D, k, eta = 80, 2.0, 0.3
    v = 1 / (k * (1 - k * eta / 2))
    g = gen(8)
    x0 = math.sqrt(v) * torch.randn(4000, D, generator=g, dtype=torch.float64)
    out = ebm.langevin_chain(x0, "gaussian", 20, eta, generator=g, mean=torch.zeros(D, dtype=torch.float64),
                             precision=k * torch.eye(D, dtype=torch.float64))
    se = v * math.sqrt(2 / out.numel())
    assert abs((out ** 2).mean().item() - v) < 5 * se


@pytest.mark.parametrize("sampler", ["langevin", "hmc"])
def test_chain_trajectory_holds_the_state_after_every_thin_th_step(sampler):
    # traj[j] is the state after step (j + 1) * thin: the same as a chain of that many steps on the same seed.
    x = torch.randn(6, 3, dtype=torch.float64, generator=gen(9))

    def run(n_steps, **kw):
        if sampler == "langevin":
            return ebm.langevin_chain(x, "double_well", n_steps, 0.05, generator=gen(10), **kw)
        return ebm.hmc_chain(x, "double_well", n_steps, 0.1, 3, generator=gen(10), **kw)

    full = run(8, thin=3)
    traj = full[-1]
    assert traj.shape == (2, 6, 3)
    for j in range(2):
        shorter = run(3 * (j + 1))
        assert torch.equal(traj[j], shorter if sampler == "langevin" else shorter[0])
    assert torch.equal(full[0], run(8) if sampler == "langevin" else run(8)[0])


# ---------------------------------------------------------------- normal: tails and independence

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_normal_32bit_tails_beyond_four_sigma(dtype):
    # 2^22 draws: P(|z| > 3.5) = 4.653e-4 and P(|z| > 4) = 6.334e-5 (~1952 and ~266 expected), each checked at
    # 5 standard errors (chance ~6e-7); the radius's 23-bit uniform bounds |z| by sqrt(2 * 23 * ln 2) = 5.647
    # (the docstring's 5.65).
    z = sampling.normal(torch.zeros(2048), torch.ones(2048), 2048, dtype=dtype, generator=gen(11)).double()
    assert torch.isfinite(z).all()
    n = z.numel()
    for k in (3.5, 4.0):
        p = math.erfc(k / math.sqrt(2))
        count = (z.abs() > k).sum().item()
        assert abs(count - n * p) < 5 * math.sqrt(n * p), (k, count, n * p)
    assert z.abs().max().item() <= 5.6466


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_normal_stream_lags_and_consecutive_calls_are_uncorrelated(dtype):
    # Lags 1..8 of the flat stream (lanes of one Philox call, and of neighbouring calls), and two consecutive
    # calls on one generator (a reused stream would correlate them fully): within 5 standard errors of 0.
    g = gen(12)
    a = sampling.normal(torch.zeros(1000), torch.ones(1000), 500, dtype=dtype, generator=g).double().flatten()
    b = sampling.normal(torch.zeros(1000), torch.ones(1000), 500, dtype=dtype, generator=g).double().flatten()
    n = a.numel()
    for lag in range(1, 9):
        assert abs(torch.corrcoef(torch.stack([a[:-lag], a[lag:]]))[0, 1].item()) < 5 / math.sqrt(n), lag
        # squares too: Box-Muller pairs share a radius, whose dependence a plain correlation misses
        sq = a * a
        assert abs(torch.corrcoef(torch.stack([sq[:-lag], sq[lag:]]))[0, 1].item()) < 5 / math.sqrt(n), lag
    assert abs(torch.corrcoef(torch.stack([a, b]))[0, 1].item()) < 5 / math.sqrt(n)


# ---------------------------------------------------------------- diffusion: the posterior's marginals

def _q_sample(sched, t, x0, g):
    abar = sched[t, 1].item()
    eps = torch.randn(x0.shape, generator=g, dtype=torch.float64)
    return math.sqrt(abar) * x0 + math.sqrt(1 - abar) * eps, eps


def _prediction(kind, x0, eps, abar):
    return {"epsilon": eps, "sample": x0,
            "v_prediction": math.sqrt(abar) * eps - math.sqrt(1 - abar) * x0}[kind]


def _assert_marginal(out, x0, abar_prev):
    # out ~ N(sqrt(abar_prev) x0, 1 - abar_prev): standardized mean within 5 SE of 0, variance within 5 SE of 1
    z = ((out - math.sqrt(abar_prev) * x0) / math.sqrt(1 - abar_prev)).flatten()
    n = z.numel()
    assert abs(z.mean().item()) < 5 / math.sqrt(n)
    assert abs(z.var().item() - 1) < 5 * math.sqrt(2 / n)


@pytest.mark.parametrize("prediction_type", ["epsilon", "sample", "v_prediction"])
def test_ddpm_step_with_the_true_prediction_lands_on_q_of_x_prev(prediction_type):
    # With the true x0, the DDPM posterior q(x_{t-1} | x_t, x0) composed with q(x_t | x0) is q(x_{t-1} | x0).
    sched = diffusion.ddpm_schedule(1000, "squaredcos_cap_v2")
    g = gen(13)
    x0 = 0.5 * torch.randn(200, 1000, generator=g, dtype=torch.float64).clamp(-1, 1)
    for t in (1, 300, 999):
        xt, eps = _q_sample(sched, t, x0, g)
        m = _prediction(prediction_type, x0, eps, sched[t, 1].item())
        out = diffusion.ddpm_step(m, t, xt, sched, prediction_type=prediction_type, clip_sample=False, generator=g)
        _assert_marginal(out, x0, sched[t - 1, 1].item())


@pytest.mark.parametrize("eta", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("prediction_type", ["epsilon", "sample", "v_prediction"])
def test_ddim_step_with_the_true_prediction_lands_on_q_of_x_prev(prediction_type, eta):
    # DDIM's family of posteriors keeps q(x_prev | x0) = N(sqrt(abar_prev) x0, 1 - abar_prev) for every eta.
    sched = diffusion.ddpm_schedule(1000, "linear")
    g = gen(14)
    x0 = 0.5 * torch.randn(200, 1000, generator=g, dtype=torch.float64).clamp(-1, 1)
    for t, t_prev in ((999, 899), (500, 480), (20, 0)):
        xt, eps = _q_sample(sched, t, x0, g)
        m = _prediction(prediction_type, x0, eps, sched[t, 1].item())
        out = diffusion.ddim_step(m, t, t_prev, xt, sched, eta=eta, prediction_type=prediction_type,
                                  clip_sample=False, generator=g)
        _assert_marginal(out, x0, sched[t_prev, 1].item())
