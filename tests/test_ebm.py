"""Family `ebm`: energies and scores against reference.py, samplers tested statistically.

Statistical tolerances are 5 standard errors of the estimate (a chance failure is ~1e-6 per
check), and every statistical test is built so that the known bugs (wrong sign of the score,
noise scale inside the square root, one normal reused across dimensions) move the estimate by
many more standard errors than that.
"""
import math

import pytest
import torch
from conftest import DEVICES, TOLERANCES, check_dynamic_batch, needs_cuda, needs_graphs, needs_two_gpus, on_two_gpus
from hypothesis import given, settings
from hypothesis import strategies as st

import loader

ebm = loader.load("ebm")
ref = ebm.reference

LOCAL = ["double_well", "harmonic", "rosenbrock", "rastrigin", "ackley"]
PARAMS = {
    "double_well": dict(barrier_height=1.5, b=0.8),
    "harmonic": dict(k=2.0),
    "rosenbrock": dict(a=1.0, b=10.0),
    "rastrigin": dict(a=5.0),
    "ackley": dict(a=20.0, b=0.2, c=2 * math.pi),
}
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def spd(D, dtype=torch.float64, device="cpu", symmetric=False):
    """A well-conditioned precision matrix (optionally not symmetric: only ½(P + Pᵀ) matters)."""
    a = torch.randn(D, D, dtype=torch.float64)
    p = a @ a.T / D + torch.eye(D, dtype=torch.float64)
    if not symmetric:
        p = p + 0.1 * torch.randn(D, D, dtype=torch.float64)
    return p.to(device, dtype)


def assert_close_scaled(out, expected, dtype):
    """Compare in float64 with the dtype's tolerance, absolute part scaled by the output's size."""
    rtol = TOLERANCES[dtype][1] * (4 if dtype in (torch.float16, torch.bfloat16) else 10)
    scale = expected.abs().max().item() + 1.0
    torch.testing.assert_close(out.double(), expected.double(), rtol=rtol, atol=rtol * scale)


# ---------------------------------------------------------------- energies and scores

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("D", [2, 16, 37, 100])
@pytest.mark.parametrize("model", LOCAL)
def test_local_energy_and_score(device, dtype, D, model):
    x = torch.randn(67, D, device=device).to(dtype)
    params = PARAMS[model]
    x64 = x.double()
    e = ebm.energy(x, model, **params)
    s = ebm.score(x, model, **params)
    assert e.shape == (67,) and e.dtype == dtype and s.shape == x.shape and s.dtype == dtype
    assert_close_scaled(e, ref.ENERGIES[model](x64, **params), dtype)
    assert_close_scaled(s, ref.autograd_score(ref.ENERGIES[model], x64, **params), dtype)


def test_float_cos_and_sin_at_half_turns_and_far_out(device):
    """cos(2πx) and sin(2πx) in float split 2x into the nearest integer n and a rest |r| <= ½ (on the
    CPU by an int conversion, so the loops vectorize). Quarters put 2x on integers and halves (the
    ties), and just below integers (a rest near 1 before the step to the nearer integer); far out, floats are halves (2^21), then integers (2^22 on), then beyond an int (2^31);
    Inf and NaN give NaN. Ackley in one dimension shows them at O(1): far out its energy is
    a + e − exp(cos 2πx) and its score −2π·exp(cos 2πx)·sin 2πx."""
    far = [2.0 ** 21 + 0.25, -(2.0 ** 21) - 0.75, 2.0 ** 22 + 0.5, -(2.0 ** 22) - 1.5, 2.0 ** 23 + 1, 2.0 ** 24 + 2,
           3.0e9, -5.0e9]
    quarters = torch.arange(-64, 64) * 0.25 + torch.tensor([0.0, 1e-3, -5e-4]).repeat(43)[:128]
    x = torch.cat([quarters[quarters != 0], torch.tensor(far)])  # at 0 the reference's score is NaN
    x = x.view(-1, 1).to(device)
    for name, want in (("energy", ref.ENERGIES["ackley"](x.double())),
                       ("score", ref.autograd_score(ref.ENERGIES["ackley"], x.double()))):
        got = getattr(ebm, f"ackley_{name}")(x)
        # atol: float64's own 2π·x is off by ~4e-5 rad at 5e9
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-4, msg=lambda m: f"ackley_{name}: {m}")
    # 1e30 is an even integer in float: cos 1, sin 0 (float64's cos of 2π·1e30 is noise, so no reference)
    huge = torch.tensor([[1.0e30]], device=device)
    assert ebm.ackley_energy(huge).item() == pytest.approx(20.0, abs=1e-5)
    assert ebm.ackley_score(huge).item() == 0.0
    special = torch.tensor([[float("inf")], [-float("inf")], [float("nan")]], device=device)
    for op in (ebm.rastrigin_energy, ebm.rastrigin_score, ebm.ackley_energy, ebm.ackley_score):
        assert op(special).isnan().all(), op


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("D", [1, 3, 16, 37, 64, 100])
def test_gaussian_energy_and_score(device, dtype, D):
    x = torch.randn(67, D, device=device).to(dtype)
    mean = torch.randn(D, device=device).to(dtype)
    precision = spd(D, dtype, device)
    e = ebm.gaussian_energy(x, mean, precision)
    s = ebm.gaussian_score(x, mean, precision)
    args64 = (mean.double(), precision.double())
    assert_close_scaled(e, ref.gaussian_energy(x.double(), *args64), dtype)
    assert_close_scaled(s, ref.autograd_score(ref.gaussian_energy, x.double(), *args64), dtype)


@needs_cuda
@pytest.mark.parametrize("rows", [1, 15, 17, 1000, 2**18 + 5])
def test_gaussian_d16_float32_tiles_and_alignment_on_cuda(rows):
    """float32 rows of 16 take the tensor-core kernel when x and mean are 16-byte aligned, the FMA
    kernel otherwise: every row of partial 16-row tiles, several grid-stride trips, both paths."""
    precision = spd(16, torch.float32, "cuda")
    for offset in (0, 1):  # offset 1: x and mean start 4 bytes past 16-byte alignment
        x = torch.randn(rows * 16 + offset, device="cuda")[offset:].view(rows, 16)
        mean = torch.randn(16 + offset, device="cuda")[offset:]
        args64 = (mean.double(), precision.double())
        for op in ("gaussian_energy", "gaussian_score"):
            got, want = getattr(ebm, op)(x, mean, precision), getattr(ref, op)(x.double(), *args64)
            # float32 FMAs and the three-way TF32 split both stay near 1e-6 of the largest value
            # (a two-way split, or TF32 alone, would be near 1e-3)
            error = (got.double() - want).abs().max() / want.abs().max()
            assert error < 1e-5, f"{op}, offset {offset}: relative error {error:.2e}"


def test_reference_closed_forms_match_autograd():
    x = torch.randn(20, 9, dtype=torch.float64)
    for model in LOCAL:
        torch.testing.assert_close(ref.SCORES[model](x, **PARAMS[model]),
                                   ref.autograd_score(ref.ENERGIES[model], x, **PARAMS[model]))
    mean, precision = torch.randn(9, dtype=torch.float64), spd(9)
    torch.testing.assert_close(ref.gaussian_score(x, mean, precision),
                               ref.autograd_score(ref.gaussian_energy, x, mean, precision))


def test_strided_inputs_and_empty_batch(device):
    x = torch.randn(40, 24, device=device)[:, ::2]  # not contiguous
    torch.testing.assert_close(ebm.rosenbrock_score(x), ref.rosenbrock_score(x), rtol=1e-5, atol=1e-4)
    mean, precision = torch.randn(12, device=device), spd(12, torch.float32, device)
    torch.testing.assert_close(ebm.gaussian_energy(x, mean, precision), ref.gaussian_energy(x, mean, precision),
                               rtol=1e-5, atol=1e-4)
    empty = torch.empty(0, 5, device=device)
    assert ebm.harmonic_energy(empty).shape == (0,)
    assert ebm.gaussian_score(empty, mean[:5], precision[:5, :5]).shape == (0, 5)


@pytest.mark.parametrize("model", LOCAL)
def test_energy_gradcheck(device, model):
    x = torch.randn(5, 6, dtype=torch.float64, device=device, requires_grad=True)
    params = PARAMS[model]
    assert torch.autograd.gradcheck(lambda y: ebm.energy(y, model, **params), (x,))


@pytest.mark.parametrize("D", [5, 70])
def test_gaussian_energy_gradcheck(device, D):
    x = torch.randn(4, D, dtype=torch.float64, device=device, requires_grad=True)
    mean = torch.randn(D, dtype=torch.float64, device=device, requires_grad=True)
    precision = spd(D, torch.float64, device).requires_grad_(True)
    assert torch.autograd.gradcheck(ebm.gaussian_energy, (x, mean, precision))


def test_opcheck(device):
    ops = ebm.ops
    x = torch.randn(8, 5, device=device)
    xg = x.clone().requires_grad_(True)
    mean, precision = torch.randn(5, device=device), spd(5, torch.float32, device)
    torch.library.opcheck(ops.gaussian_energy, (xg, mean, precision))
    torch.library.opcheck(ops.gaussian_score, (x, mean, precision))
    for model in LOCAL:
        args = tuple(PARAMS[model].values())
        torch.library.opcheck(getattr(ops, f"{model}_energy"), (xg, *args))
        torch.library.opcheck(getattr(ops, f"{model}_score"), (x, *args))
    g = torch.randn_like(x)
    gen = lambda: torch.Generator(device).manual_seed(3)  # noqa: E731  (opcheck compares repeated calls)
    torch.library.opcheck(ops.langevin_step, (xg, g.clone().requires_grad_(True), 0.1, 0.5, -1.0, 1.0),
                          {"generator": gen()}, test_utils=("test_schema", "test_faketensor",
                                                            "test_autograd_registration"))
    torch.library.opcheck(ops.langevin_step_, (x.clone(), g, 0.1, 0.5, None, None),
                          test_utils=("test_schema", "test_faketensor"))
    torch.library.opcheck(ops.langevin_chain, (x, "gaussian", mean, precision, [], 3, 0.1, 1.0, 1),
                          test_utils=("test_schema", "test_faketensor"))
    torch.library.opcheck(ops.hmc_chain, (x, "harmonic", None, None, [2.0], 3, 0.1, 2, 1),
                          test_utils=("test_schema", "test_faketensor"))
    # The deterministic ops also go through the full opcheck (incl. aot_dispatch), noise off.
    torch.library.opcheck(ops.langevin_step, (x, g, 0.1, 0.0, None, None))


def test_torch_compile_fullgraph():
    mean, precision = torch.randn(4), spd(4, torch.float32)

    def f(x):
        g = -ebm.gaussian_score(x, mean, precision)
        y = ebm.langevin_step(x, g, 0.05, 0.0, clamp=3.0)
        return y, ebm.gaussian_energy(y, mean, precision) + ebm.rastrigin_energy(y)

    x = torch.randn(16, 4)
    compiled = torch.compile(f, fullgraph=True)
    for a, b in zip(compiled(x), f(x)):
        torch.testing.assert_close(a, b)



def _dynamic_case(name, device):
    """(fn, make_args) of one op for check_dynamic_batch: rows x (B, 6) (6: no batch size of the check, which
    duck sizing would tie to D), float32; mean and precision (D = 6) fixed."""
    mean, precision = torch.randn(6, device=device), spd(6, torch.float32, device)
    rows = lambda n: torch.randn(n, 6, device=device)  # noqa: E731
    if name in ("gaussian_energy", "gaussian_score"):
        return getattr(ebm, name), lambda n: (rows(n), mean, precision)
    if name.endswith(("_energy", "_score")):
        model = name.rsplit("_", 1)[0]
        return lambda x: getattr(ebm, name)(x, **PARAMS[model]), lambda n: (rows(n),)
    if name == "langevin_step":
        return lambda x, g: ebm.langevin_step(x, g, 0.1, 0.5, clamp=2.0), lambda n: (rows(n), rows(n))
    if name == "langevin_step_":
        return lambda x, g: ebm.langevin_step_(x.clone(), g, 0.1, 0.5), lambda n: (rows(n), rows(n))
    if name == "langevin_chain":
        return (lambda x, m, p: ebm.langevin_chain(x, "gaussian", 3, 0.05, thin=1, clamp=4.0, mean=m, precision=p),
                lambda n: (rows(n), mean, precision))
    assert name == "hmc_chain"
    return lambda x: ebm.hmc_chain(x, "rosenbrock", 3, 0.01, 2, thin=1, **PARAMS["rosenbrock"]), lambda n: (rows(n),)


@pytest.mark.parametrize("name", [f"{m}_{kind}" for m in ["gaussian"] + LOCAL for kind in ("energy", "score")]
                         + ["langevin_step", "langevin_step_", "langevin_chain", "hmc_chain"])
def test_dynamic_batch_compiles_once_and_exports(device, name):
    """The batch B of x is symbolic in the ops' shape rules: one torch.compile(dynamic=True) graph for every B,
    and torch.export with B dynamic (each op pinned B, session 30)."""
    check_dynamic_batch(*_dynamic_case(name, device))


@pytest.mark.parametrize("kind", ["energy", "score"])
def test_gaussian_dynamic_width_compiles_once_and_exports(device, kind):
    """The Gaussian's row width D is symbolic too: its shape rule is the same on every route (row kernels up to
    D = 64, a matrix product beyond), so the route must not guard D. Meta chose the route, so torch.compile
    (dynamic=True) compiled again past D = 64 and torch.export refused a dynamic D unless capped at max=64."""
    from torch._dynamo.utils import counters

    op = getattr(ebm, f"gaussian_{kind}")
    make = lambda n: (torch.randn(3, n, device=device), torch.randn(n, device=device),  # noqa: E731
                      spd(n, torch.float32, device))
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(op, dynamic=True, fullgraph=True)
    for n in (5, 70, 9, 130):
        args = make(n)
        torch.testing.assert_close(compiled(*args), op(*args), rtol=1e-4, atol=1e-4)
    assert counters["stats"]["unique_graphs"] == 1, f"{counters['stats']['unique_graphs']} graphs for 4 widths"

    class Wrapper(torch.nn.Module):
        def forward(self, x, mean, precision):
            return op(x, mean, precision)

    width = torch.export.Dim("D", min=2, max=1 << 20)
    program = torch.export.export(Wrapper(), make(5), dynamic_shapes=({1: width}, {0: width}, {0: width, 1: width}))
    for n in (70, 9):
        args = make(n)
        torch.testing.assert_close(program.module()(*args), op(*args), rtol=1e-4, atol=1e-4)


@settings(max_examples=30, deadline=None)
@given(device=st.sampled_from(DEVICES), dtype=st.sampled_from(DTYPES), model=st.sampled_from(["gaussian"] + LOCAL),
       B=st.integers(0, 40), D=st.integers(1, 80), step=st.integers(1, 3), transpose=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_property_energy_score_match_reference(device, dtype, model, B, D, step, transpose, seed):
    # Random shapes, non-contiguous views (column steps, transposed storage) and dtypes.
    if model == "rosenbrock":
        D = max(D, 2)
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(D, B, step, generator=g) if transpose else torch.randn(B, D * step, generator=g)
    x = (base[:, :, 0].T if transpose else base[:, ::step]).to(device, dtype)
    if model == "gaussian":
        params = dict(mean=torch.randn(D, generator=g).to(device, dtype), precision=spd(D, dtype, device))
        args64 = dict(mean=params["mean"].double(), precision=params["precision"].double())
    else:
        params = args64 = PARAMS[model]
    x64 = x.double()
    e, s = ebm.energy(x, model, **params), ebm.score(x, model, **params)
    assert e.shape == (B,) and s.shape == (B, D) and e.dtype == s.dtype == dtype
    if B:
        assert_close_scaled(e, ref.ENERGIES[model](x64, **args64), dtype)
        assert_close_scaled(s, ref.SCORES[model](x64, **args64), dtype)


def chain_model(model, D, dtype, device):
    """A chain's model parameters (a random mean and SPD precision for the Gaussian) and the reference score
    in float64."""
    if model == "gaussian":
        params = dict(mean=torch.randn(D, dtype=dtype, device=device), precision=spd(D, dtype, device))
        return params, lambda y: ref.gaussian_score(y, params["mean"].double(), params["precision"].double())
    params = PARAMS[model]
    return params, lambda y: ref.SCORES[model](y, **params)


@settings(max_examples=25, deadline=None)
@given(device=st.sampled_from(DEVICES), dtype=st.sampled_from([torch.float32, torch.float64]),
       model=st.sampled_from(["gaussian"] + LOCAL), B=st.integers(0, 20), D=st.integers(2, 70),
       n_steps=st.integers(0, 4), thin=st.integers(0, 2))
def test_property_chain_without_noise_matches_reference(device, dtype, model, B, D, n_steps, thin):
    x = (0.5 * torch.randn(D, B, dtype=torch.float64)).T.to(device, dtype)  # not contiguous
    step_size = 0.002 if model in ("rosenbrock", "rastrigin") else 0.02
    params, score = chain_model(model, D, dtype, device)
    result = ebm.langevin_chain(x, model, n_steps, step_size, 0.0, thin=thin, **params)
    out, traj = result if thin else (result, None)
    expected = ref.langevin_chain(x.double(), score, n_steps, step_size, 0.0, thin=thin)
    tol = 1e-9 if dtype == torch.float64 else 1e-4
    torch.testing.assert_close(out.double(), expected[0] if thin else expected, rtol=tol, atol=tol)
    if thin:
        assert traj.shape == (n_steps // thin, B, D)
        torch.testing.assert_close(traj.double(), expected[1], rtol=tol, atol=tol)


def test_meta_shapes():
    x = torch.empty(7, 5, device="meta")
    mean, precision = torch.empty(5, device="meta"), torch.empty(5, 5, device="meta")
    assert ebm.gaussian_energy(x, mean, precision).shape == (7,)
    assert ebm.gaussian_score(x, mean, precision).shape == (7, 5)
    assert ebm.ackley_score(x).shape == (7, 5) and ebm.rosenbrock_energy(x).shape == (7,)
    out, traj = ebm.langevin_chain(x, "harmonic", 6, 0.1, thin=2)
    assert out.shape == (7, 5) and traj.shape == (3, 7, 5)
    out, acc, traj = ebm.hmc_chain(x, "gaussian", 4, 0.1, 2, thin=4, mean=mean, precision=precision)
    assert out.shape == (7, 5) and acc.shape == (7,) and traj.shape == (1, 7, 5)
    with pytest.raises(ValueError, match="mean"):
        ebm.gaussian_energy(x, torch.empty(4, device="meta"), precision)


def test_inplace_target_must_not_overlap(device):
    x = torch.zeros(1, 5, device=device).expand(4, 5)
    with pytest.raises(ValueError, match="x"):
        ebm.langevin_step_(x, torch.zeros(4, 5, device=device), 0.1)
    # grad sharing part of x's memory is read before x is written
    buf = torch.randn(21, device=device)
    y, g = buf[:20].view(4, 5), buf[1:21].view(4, 5)
    expected = y - 0.1 * g
    ebm.langevin_step_(y, g, 0.1, 0.0)
    torch.testing.assert_close(y, expected)


# ---------------------------------------------------------------- langevin_step

def test_langevin_step_deterministic_part(device):
    x, g = torch.randn(100, 7, device=device), torch.randn(100, 7, device=device)
    torch.testing.assert_close(ebm.langevin_step(x, g, 0.1, 0.0), x - 0.1 * g)
    y = ebm.langevin_step(x, g, 0.1, 1.0, clamp=(-0.5, 0.25))
    assert y.min() >= -0.5 and y.max() <= 0.25
    y = ebm.langevin_step(x * 10, g, 0.1, clamp=1.0)
    assert y.abs().max() <= 1.0


@pytest.mark.parametrize("dtype", DTYPES)
def test_langevin_step_noise_is_standard_normal(device, dtype):
    n, step, scale = 200_000, 0.02, 0.3
    x = torch.randn(n // 8, 8, device=device).to(dtype)
    g = torch.randn(n // 8, 8, device=device).to(dtype)
    y = ebm.langevin_step(x, g, step, scale)
    z = ((y.double() - (x.double() - step * g.double())) / (scale * math.sqrt(2 * step)))
    rounding = 0.0 if dtype in (torch.float32, torch.float64) else 0.02 / (scale * math.sqrt(2 * step))
    assert abs(z.mean().item()) < 5 / math.sqrt(n) + rounding
    assert abs(z.std().item() - 1) < 5 / math.sqrt(2 * n) + rounding
    # fourth moment of a normal is 3 (a uniform or a constant would not pass)
    if dtype in (torch.float32, torch.float64):
        assert abs((z ** 4).mean().item() - 3) < 5 * math.sqrt(96 / n)
    # every element gets its own normal: neighbours and rows are uncorrelated
    corr = torch.corrcoef(torch.stack([z[:, 0], z[:, 1], z[:, 5]]))
    assert corr[0, 1].abs() < 5 / math.sqrt(n / 8) and corr[0, 2].abs() < 5 / math.sqrt(n / 8)


def test_langevin_step_noise_tails(device):
    # The tails of the draws (Box-Muller's radius is sqrt(-2 log u): small u, the polynomial log's
    # hardest inputs on the CPU) hold the normal's mass: beyond 3 and 4 sigma, two-sided.
    n = 1 << 22
    zeros = torch.zeros(n // 16, 16, device=device)
    z = ebm.langevin_step(zeros, zeros, 0.5, 1.0).double().flatten()  # sqrt(2 * 0.5) = 1: z itself
    for k, p in [(3.0, 2.699796e-3), (4.0, 6.334248e-5)]:
        count = (z.abs() > k).sum().item()
        assert abs(count - n * p) < 5 * math.sqrt(n * p), (k, count, n * p)
    # 24-bit uniforms in (0, 1] bound the radius by sqrt(2 * 24 * log 2) = 5.77
    assert z.abs().max().item() <= 5.77


def test_langevin_step_seeds_and_inplace(device):
    x, g = torch.randn(33, 5, device=device), torch.randn(33, 5, device=device)
    torch.manual_seed(7)
    a = ebm.langevin_step(x, g, 0.1)
    b = ebm.langevin_step(x, g, 0.1)
    torch.manual_seed(7)
    c = ebm.langevin_step(x, g, 0.1)
    assert torch.equal(a, c) and not torch.equal(a, b)
    torch.manual_seed(7)
    y = x.clone()
    assert ebm.langevin_step_(y, g, 0.1) is y
    assert torch.equal(y, a)
    gen = torch.Generator(device).manual_seed(1)
    d = ebm.langevin_step(x, g, 0.1, generator=gen)
    gen.manual_seed(1)
    assert torch.equal(d, ebm.langevin_step(x, g, 0.1, generator=gen))
    strided = torch.randn(5, 66, device=device).T  # in place on a non-contiguous tensor
    before = strided.clone()
    ebm.langevin_step_(strided, torch.zeros_like(strided), 0.1, 0.0)
    assert torch.equal(strided, before)


def test_langevin_step_gradcheck(device):
    x = torch.randn(4, 3, dtype=torch.float64, device=device, requires_grad=True)
    g = torch.randn(4, 3, dtype=torch.float64, device=device, requires_grad=True)

    def f(x, g):  # a fixed generator makes the noise a constant
        return ebm.langevin_step(x, g, 0.1, 1.0, generator=torch.Generator(device).manual_seed(0))

    assert torch.autograd.gradcheck(f, (x, g))


# ---------------------------------------------------------------- chains

def ula_covariance(precision, step, noise_scale):
    """Exact stationary covariance of unadjusted Langevin on a Gaussian: σ²·(P(I − ηP/2))⁻¹."""
    eye = torch.eye(precision.shape[0], dtype=torch.float64)
    return noise_scale ** 2 * torch.linalg.inv(precision @ (eye - 0.5 * step * precision))


def assert_gaussian_samples(x, mean, cov):
    """Sample mean and covariance of rows x within 5 standard errors of (mean, cov)."""
    x = x.double().cpu()
    n = x.shape[0]
    var = torch.diagonal(cov)
    assert ((x.mean(0) - mean).abs() < 5 * torch.sqrt(var / n)).all(), (x.mean(0), mean)
    se = torch.sqrt((var[:, None] * var[None, :] + cov ** 2) / n)
    assert ((torch.cov(x.T) - cov).abs() < 5 * se).all(), (torch.cov(x.T), cov)


@pytest.mark.parametrize("D", [3, 16, 37, 100])
@pytest.mark.parametrize("model", ["gaussian"] + LOCAL)
def test_langevin_chain_without_noise_is_gradient_descent(device, model, D):
    # Checks the score each chain kernel uses, every width tier and the wide-row path.
    x = 0.5 * torch.randn(16, D, dtype=torch.float64, device=device)
    step, n_steps = (0.002 if model in ("rosenbrock", "rastrigin") else 0.02), 20
    if model == "gaussian":
        params = dict(mean=torch.randn(D, dtype=torch.float64, device=device), precision=spd(D, torch.float64, device))
        score = lambda y: ref.gaussian_score(y, **params)  # noqa: E731
    else:
        params = PARAMS[model]
        score = lambda y: ref.SCORES[model](y, **params)  # noqa: E731
    out, traj = ebm.langevin_chain(x, model, n_steps, step, 0.0, thin=5, **params)
    expected = x
    for _ in range(n_steps):
        expected = expected + step * score(expected)
    torch.testing.assert_close(out, expected, rtol=1e-9, atol=1e-9)
    assert traj.shape == (4, 16, D) and torch.equal(traj[-1], out)
    out32 = ebm.langevin_chain(x.float(), model, n_steps, step, 0.0,
                               **{k: (v.float() if torch.is_tensor(v) else v) for k, v in params.items()})
    torch.testing.assert_close(out32.double(), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("D", [3, 20])
def test_langevin_chain_gaussian_statistics(device, D):
    torch.manual_seed(1)
    B = 8192 if D == 3 else 2048
    mean = torch.randn(D, dtype=torch.float64)
    precision = spd(D, symmetric=True)
    step, noise_scale, n_steps = 0.05, 0.7, 300
    x0 = 2 * torch.randn(B, D, device=device)
    out = ebm.langevin_chain(x0, "gaussian", n_steps, step, noise_scale, mean=mean.float().to(device),
                             precision=precision.float().to(device))
    # noise_scale inside the square root would give 0.7 instead of 0.49 times the covariance
    assert_gaussian_samples(out, mean, ula_covariance(precision, step, noise_scale))


def test_langevin_chain_double_well_visits_both_modes(device):
    torch.manual_seed(2)
    B = 4096
    x0 = torch.ones(B, 1, device=device)  # every chain starts in the right-hand well
    out = ebm.langevin_chain(x0, "double_well", 2000, 0.02, barrier_height=0.5, b=1.0).double().cpu()
    assert abs((out > 0).double().mean().item() - 0.5) < 5 * 0.5 / math.sqrt(B)
    grid = torch.linspace(-4, 4, 20001, dtype=torch.float64)
    density = torch.exp(-0.5 * (grid ** 2 - 1) ** 2)
    mean_abs = torch.trapezoid(grid.abs() * density, grid) / torch.trapezoid(density, grid)
    assert abs(out.abs().mean().item() - mean_abs.item()) < 0.05


def test_chain_seeds_reproduce(device):
    x = torch.randn(64, 6, device=device)
    kw = dict(mean=torch.zeros(6, device=device), precision=torch.eye(6, device=device))
    torch.manual_seed(5)
    a = ebm.langevin_chain(x, "gaussian", 10, 0.1, **kw)
    b = ebm.langevin_chain(x, "gaussian", 10, 0.1, **kw)
    torch.manual_seed(5)
    assert torch.equal(a, ebm.langevin_chain(x, "gaussian", 10, 0.1, **kw)) and not torch.equal(a, b)
    torch.manual_seed(5)
    h = ebm.hmc_chain(x, "rastrigin", 5, 0.05, 3)
    torch.manual_seed(5)
    assert all(torch.equal(u, v) for u, v in zip(h, ebm.hmc_chain(x, "rastrigin", 5, 0.05, 3)))
    gen = torch.Generator(device).manual_seed(9)
    c = ebm.langevin_chain(x, "harmonic", 10, 0.1, generator=gen, k=2.0)
    gen.manual_seed(9)
    assert torch.equal(c, ebm.langevin_chain(x, "harmonic", 10, 0.1, generator=gen, k=2.0))


def test_langevin_chain_clamp_and_zero_steps(device):
    x = torch.randn(50, 4, device=device)
    out = ebm.langevin_chain(x, "harmonic", 20, 0.1, clamp=0.5, k=0.1)
    assert out.abs().max() <= 0.5
    assert torch.equal(ebm.langevin_chain(x, "harmonic", 0, 0.1), x)
    out, traj = ebm.langevin_chain(x, "harmonic", 3, 0.1, thin=5)
    assert traj.shape == (0, 50, 4)


@pytest.mark.parametrize("D", [3, 40, 80])  # 80: the composed path on both devices (D > 64 on the CPU)
def test_hmc_gaussian(device, D):
    torch.manual_seed(3)
    B = 4096 if D == 3 else 1024
    mean = torch.randn(D, dtype=torch.float64)
    precision = spd(D, symmetric=True)
    x0 = torch.randn(B, D, device=device)
    out, accept, traj = ebm.hmc_chain(x0, "gaussian", 100 if D == 3 else 40, 0.1, 10, thin=10,
                                      mean=mean.float().to(device), precision=precision.float().to(device))
    assert accept.shape == (B,) and 0.6 < accept.mean().item() <= 1.0
    assert torch.equal(traj[-1], out)
    assert_gaussian_samples(out, mean, torch.linalg.inv(precision))  # HMC is exact: no step-size bias


def test_hmc_double_well_and_every_model(device):
    torch.manual_seed(4)
    B = 4096
    out, accept = ebm.hmc_chain(torch.ones(B, 1, device=device), "double_well", 200, 0.3, 5, barrier_height=0.5)
    assert abs((out > 0).double().mean().item() - 0.5) < 5 * 0.5 / math.sqrt(B)
    assert accept.mean() > 0.5
    for model in LOCAL:
        x = 0.3 * torch.randn(256, 3, device=device)
        out, accept = ebm.hmc_chain(x, model, 20, 0.01, 3, **PARAMS[model])
        assert torch.isfinite(out).all() and accept.mean() > 0.5, model


def test_hmc_wrong_sign_would_be_rejected(device):
    # Leapfrog energy error is small for a small step: acceptance near 1. A sign error in
    # the score makes the energy grow and acceptance collapse, so this guards the kernel.
    x = torch.randn(512, 8, device=device)
    _, accept = ebm.hmc_chain(x, "harmonic", 30, 0.05, 10, k=4.0)
    assert accept.mean() > 0.97


# ---------------------------------------------------------------- bad input

def bad_inputs(device):
    x = torch.randn(4, 3, device=device)
    mean, precision = torch.zeros(3, device=device), torch.eye(3, device=device)
    return [
        ("x", lambda: ebm.harmonic_energy(torch.randn(5, device=device))),
        ("x", lambda: ebm.gaussian_score(torch.randn(2, 3, 3, device=device), mean, precision)),
        ("x", lambda: ebm.rosenbrock_energy(torch.randn(4, 1, device=device))),
        ("x", lambda: ebm.double_well_score(torch.ones(4, 3, dtype=torch.int64, device=device))),
        ("mean", lambda: ebm.gaussian_energy(x, torch.zeros(4, device=device), precision)),
        ("precision", lambda: ebm.gaussian_energy(x, mean, torch.eye(4, device=device))),
        ("precision", lambda: ebm.gaussian_score(x, mean, torch.eye(3, dtype=torch.float64, device=device))),
        ("barrier_height", lambda: ebm.double_well_energy(x, float("nan"))),
        ("grad", lambda: ebm.langevin_step(x, torch.zeros(4, 4, device=device), 0.1)),
        ("step_size", lambda: ebm.langevin_step(x, x, float("inf"))),
        ("step_size", lambda: ebm.langevin_step_(x, x, float("nan"))),
        ("noise_scale", lambda: ebm.langevin_step(x, x, 0.1, -1.0)),
        ("clamp", lambda: ebm.langevin_step(x, x, 0.1, clamp=(1.0, -1.0))),
        ("step_size", lambda: ebm.langevin_chain(x, "harmonic", 10, float("nan"))),
        ("n_steps", lambda: ebm.langevin_chain(x, "harmonic", -1, 0.1)),
        ("n_steps", lambda: ebm.hmc_chain(x, "harmonic", -1, 0.1, 3)),
        ("n_leapfrog", lambda: ebm.hmc_chain(x, "harmonic", 5, 0.1, 0)),
        ("thin", lambda: ebm.langevin_chain(x, "harmonic", 5, 0.1, thin=-1)),
        ("model", lambda: ebm.langevin_chain(x, "banana", 5, 0.1)),
        ("mean", lambda: ebm.langevin_chain(x, "gaussian", 5, 0.1, mean=torch.zeros(2, device=device),
                                            precision=precision)),
        ("precision", lambda: ebm.hmc_chain(x, "gaussian", 5, 0.1, 2, mean=mean)),
        ("x", lambda: ebm.langevin_chain(x.half(), "harmonic", 5, 0.1)),
        ("x", lambda: ebm.hmc_chain(torch.randn(4, 1, device=device), "rosenbrock", 5, 0.1, 2)),
        ("x", lambda: ebm.harmonic_score(torch.ones(4, 3, dtype=torch.bool, device=device))),
        ("x", lambda: ebm.ackley_energy(torch.ones(4, 3, dtype=torch.complex64, device=device))),
        ("x", lambda: ebm.langevin_step(torch.ones(4, 3, dtype=torch.int32, device=device), x, 0.1)),
        ("c", lambda: ebm.ackley_score(x, c=float("inf"))),
        ("clamp's max", lambda: ebm.langevin_step(x, x, 0.1, clamp=(None, float("nan")))),
        ("^a must be finite", lambda: ebm.langevin_chain(x, "rastrigin", 5, 0.1, a=float("inf"))),
        ("x", lambda: ebm.rastrigin_energy(torch.empty(4, 0, device=device))),
    ]


@pytest.mark.parametrize("case", range(len(bad_inputs("cpu"))))
def test_bad_input_names_the_argument(device, case):
    name, call = bad_inputs(device)[case]
    with pytest.raises((RuntimeError, ValueError), match=name):
        call()


def test_unknown_model_parameter():
    with pytest.raises(TypeError, match="bogus"):
        ebm.langevin_chain(torch.zeros(2, 2), "harmonic", 1, 0.1, bogus=1.0)


@needs_cuda
def test_mixed_devices_rejected():
    x = torch.randn(4, 3, device="cuda")
    with pytest.raises((RuntimeError, ValueError), match="mean"):
        ebm.gaussian_energy(x, torch.zeros(3), torch.eye(3, device="cuda"))


# ---------------------------------------------------------------- CUDA only

@needs_graphs
@needs_cuda
def test_cuda_graph_capture_draws_fresh_noise():
    x = torch.randn(1024, 16, device="cuda")
    mean, precision = torch.zeros(16, device="cuda"), torch.eye(16, device="cuda")
    state = x.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up outside the graph
        ebm.langevin_step_(state, -ebm.gaussian_score(state, mean, precision), 0.01)
        chain = ebm.langevin_chain(x, "gaussian", 5, 0.01, mean=mean, precision=precision)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ebm.langevin_step_(state, -ebm.gaussian_score(state, mean, precision), 0.01)
        chain = ebm.langevin_chain(x, "gaussian", 5, 0.01, mean=mean, precision=precision)
    state.copy_(x)
    graph.replay()
    first_state, first_chain = state.clone(), chain.clone()
    state.copy_(x)
    graph.replay()
    torch.cuda.synchronize()
    assert not torch.equal(first_state, state) and not torch.equal(first_chain, chain)
    assert torch.isfinite(state).all() and torch.isfinite(chain).all()


@needs_cuda
@pytest.mark.parametrize("D", [16, 100])
def test_cuda_chain_statistics_wide_and_tiers(D):
    # The one-launch kernel (D = 16) and the per-step path (D = 100) on the same target.
    torch.manual_seed(6)
    B = 16384
    mean = torch.randn(D, dtype=torch.float64)
    precision = spd(D, symmetric=True)
    out = ebm.langevin_chain(torch.randn(B, D, device="cuda"), "gaussian", 400, 0.05, 0.7,
                             mean=mean.float().cuda(), precision=precision.float().cuda())
    cov = ula_covariance(precision, 0.05, 0.7)
    idx = torch.arange(0, D, max(1, D // 8))  # a few coordinates keep the number of checks moderate
    assert_gaussian_samples(out[:, idx], mean[idx], cov[idx][:, idx])


@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("model", ["double_well", "harmonic", "rastrigin"])
def test_cuda_separable_scores_tails_and_misaligned(dtype, model):
    # Separable models' scores: a size that is not a multiple of the vector width (scalar tail),
    # a misaligned input (scalar path) and a size over one tile of blocks.
    params = PARAMS[model]
    for B, D, offset in [(3, 7, 0), (1001, 16, 0), (1001, 16, 1), (70001, 5, 0)]:
        flat = torch.randn(B * D + offset, device="cuda").to(dtype)
        x = flat[offset:].view(B, D)
        expected = ref.autograd_score(ref.ENERGIES[model], x.double(), **params)
        assert_close_scaled(ebm.score(x, model, **params), expected, dtype)


@needs_cuda
@pytest.mark.parametrize("D", [8, 13, 16, 64])
def test_cuda_chain_tiles_many_blocks_and_tails(D):
    # The one-launch chains stage a block's rows through shared memory: full-width rows (8, 16, 64)
    # and narrower ones (13, in the tier of 16); a partial last tile; and, at the larger B, more tiles
    # than the grid has blocks (kChainBlocksPerSm = 64 per SM), so that blocks take them in turn.
    # Without noise a chain is gradient descent, the reference's.
    torch.manual_seed(D)
    rows_per_block = 64 if D == 64 else 128
    grid_rows = 64 * torch.cuda.get_device_properties(0).multi_processor_count * rows_per_block
    mean, precision = torch.randn(D, device="cuda"), spd(D, torch.float32, "cuda")
    models = {"gaussian": (dict(mean=mean, precision=precision),
                           lambda y: ref.gaussian_score(y, mean.double(), precision.double())),
              "double_well": (PARAMS["double_well"], lambda y: ref.SCORES["double_well"](y, **PARAMS["double_well"]))}
    for B, thin in [(300, 1), (2 * grid_rows + 37, 0)]:
        x = 0.5 * torch.randn(B, D, device="cuda")
        for model, (params, score) in models.items():
            result = ebm.langevin_chain(x, model, 2, 0.02, 0.0, thin=thin, **params)
            expected = ref.langevin_chain(x.double(), score, 2, 0.02, 0.0, thin=thin)
            if thin:
                torch.testing.assert_close(result[1].double(), expected[1], rtol=1e-4, atol=1e-4)
                result, expected = result[0], expected[0]
            torch.testing.assert_close(result.double(), expected, rtol=1e-4, atol=1e-4)


def gaussian16_chain_rows():
    """Rows for the Gaussian chains at D = 16, float32 (ebm_mma.cuh): B with 1, 2 and 4 tiles of 16 rows per
    warp on the tensor cores, each as x and as a misaligned copy of x, which takes the thread-per-row kernels."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for B in [100, 2 * 16 * 8 * sms + 5, 4 * 16 * 8 * sms + 5]:
        x = torch.randn(B, 16, device="cuda")
        yield x, torch.empty(B * 16 + 1, device="cuda")[1:].view(B, 16).copy_(x)


@needs_cuda
def test_cuda_gaussian16_chain_on_tensor_cores_matches_thread_per_row():
    # The Gaussian Langevin chain at D = 16, float32, runs on the tensor cores (ebm_langevin.cu). Both
    # kernels draw the same noise: with P = 0 they agree bit for bit, with a real P to float32 rounding
    # (TF32-split products).
    mean, precision = torch.randn(16, device="cuda"), spd(16, torch.float32, "cuda")
    for x, misaligned in gaussian16_chain_rows():
        for p, exact in [(torch.zeros_like(precision), True), (precision, False)]:
            runs = []
            for rows in (x, misaligned):
                torch.manual_seed(3)
                runs.append(ebm.langevin_chain(rows, "gaussian", 7, 0.05, thin=3, clamp=2.5, mean=mean, precision=p))
            for ours, theirs in zip(*runs):  # the final state, then the trajectory
                if exact:
                    assert torch.equal(ours, theirs)
                else:
                    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


@needs_cuda
def test_cuda_gaussian16_hmc_on_tensor_cores_matches_thread_per_row():
    # hmc_chain for the Gaussian at D = 16, float32, runs on the tensor cores too (ebm_hmc.cu), with the
    # thread-per-row kernel's draws. With P = 0 every proposal is accepted and the two agree bit for bit;
    # with a real P, to float32 rounding in every row whose accept decisions match (a decision on the edge
    # may flip: rare).
    mean, precision = torch.randn(16, device="cuda"), spd(16, torch.float32, "cuda")
    for x, misaligned in gaussian16_chain_rows():
        for p in (torch.zeros_like(precision), precision):
            runs = []
            for rows in (x, misaligned):
                torch.manual_seed(4)
                runs.append(ebm.hmc_chain(rows, "gaussian", 6, 0.1, 4, thin=2, mean=mean, precision=p))
            (ours, rate, traj), (theirs, their_rate, their_traj) = runs
            if not p.any():
                assert torch.equal(ours, theirs) and torch.equal(traj, their_traj) and bool((rate == 1).all())
            else:
                same = rate == their_rate
                assert same.float().mean() > 0.999 and rate.mean() > 0.5
                torch.testing.assert_close(ours[same], theirs[same], rtol=1e-5, atol=1e-5)
                torch.testing.assert_close(traj[:, same], their_traj[:, same], rtol=1e-5, atol=1e-5)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("D", [8, 16, 32, 64])
def test_cuda_row_tiles_many_blocks_and_tails(dtype, D):
    # Rows of 2/4/8 vectors take the tile kernels (one tile of rows per block); B not a multiple
    # of a block's rows leaves a partial last tile, and 2^17 + 37 rows spread over many blocks.
    torch.manual_seed(D)
    mean, precision = torch.randn(D, device="cuda").to(dtype), spd(D, dtype, "cuda")
    for B in [1, 300, 2 ** 17 + 37]:
        x = torch.randn(B, D, device="cuda").to(dtype)
        for model in LOCAL:
            params = PARAMS[model]
            assert_close_scaled(ebm.energy(x, model, **params), ref.ENERGIES[model](x.double(), **params), dtype)
            assert_close_scaled(ebm.score(x, model, **params),
                                ref.autograd_score(ref.ENERGIES[model], x.double(), **params), dtype)
        args64 = (x.double(), mean.double(), precision.double())
        assert_close_scaled(ebm.gaussian_energy(x, mean, precision), ref.gaussian_energy(*args64), dtype)
        assert_close_scaled(ebm.gaussian_score(x, mean, precision), ref.gaussian_score(*args64), dtype)


@needs_cuda
@pytest.mark.parametrize("D", [4, 8, 16])
def test_cuda_float64_row_tiles_many_blocks_and_tails(D):
    # float64 rows of 2, 4 and 8 16-byte vectors (V = 2) take the tile kernels too: gaussian_tile_kernel with
    # G = 2 (K = 2 rows per lane group), 4 and 8 (scores transposed through shared memory), local_tile_kernel
    # likewise (polynomial scores with two tiles in flight). test_cuda_row_tiles_many_blocks_and_tails runs
    # float32 and the 16-bit types only, and the other tests' float64 rows (D = 1, 2, 3, 37, 64, 100; D = 16
    # at 67 rows) never reach G = 2 or 4. A copy 8 bytes past 16-byte alignment takes the lane-group kernels.
    torch.manual_seed(D)
    dtype = torch.float64
    mean, precision = torch.randn(D, dtype=dtype, device="cuda"), spd(D, dtype, "cuda")
    for B in [1, 300, 2 ** 15 + 37]:
        x = torch.randn(B, D, dtype=dtype, device="cuda")
        misaligned = torch.empty(B * D + 1, dtype=dtype, device="cuda")[1:].view(B, D).copy_(x)
        for rows in (x, misaligned):
            for model in LOCAL:
                params = PARAMS[model]
                assert_close_scaled(ebm.energy(rows, model, **params), ref.ENERGIES[model](x, **params), dtype)
                assert_close_scaled(ebm.score(rows, model, **params), ref.SCORES[model](x, **params), dtype)
            assert_close_scaled(ebm.gaussian_energy(rows, mean, precision), ref.gaussian_energy(x, mean, precision),
                                dtype)
            assert_close_scaled(ebm.gaussian_score(rows, mean, precision), ref.gaussian_score(x, mean, precision),
                                dtype)


@needs_cuda
@needs_two_gpus
def test_cuda_second_device_while_current_is_0():
    # tensors on cuda:1, the current device 0, cuda:1's current stream a side stream (conftest.on_two_gpus):
    # every kernel family of ebm (tensor-core Gaussian at D = 16, lane groups, tiles, the one-launch chains and
    # the stepwise ones past their widths) gives on cuda:1 what it gives on cuda:0, with cuda:1's generators
    mean16, p16 = torch.randn(16), spd(16, torch.float32)
    x16, x5, x100 = torch.randn(3000, 16), torch.randn(3000, 5), torch.randn(500, 100)
    cases = [
        (lambda x, m, p: ebm.gaussian_energy(x, m, p), (x16, mean16, p16)),
        (lambda x, m, p: ebm.gaussian_score(x, m, p), (x16, mean16, p16)),
        (lambda x, m, p: ebm.gaussian_score(x, m, p), (x5, mean16[:5], p16[:5, :5])),
        (lambda x: ebm.score(x, "rosenbrock", **PARAMS["rosenbrock"]), (x16,)),
        (lambda x: ebm.energy(x, "ackley", **PARAMS["ackley"]), (x5.double(),)),
        (lambda x: ebm.score(x, "rastrigin", **PARAMS["rastrigin"]), (x16.half(),)),
        (lambda x, g: ebm.langevin_step(x, g, 0.01), (x16, x16.flip(0))),
        (lambda x, g: ebm.langevin_step(x, g, 0.01, generator=torch.Generator(x.device).manual_seed(5)),
         (x5.double(), x5.double())),
        (lambda x, m, p: ebm.langevin_chain(x, "gaussian", 5, 0.05, thin=2, mean=m, precision=p), (x16, mean16, p16)),
        (lambda x: ebm.langevin_chain(x, "double_well", 5, 0.05, **PARAMS["double_well"]), (x5.double(),)),
        (lambda x: ebm.langevin_chain(x, "harmonic", 3, 0.05, **PARAMS["harmonic"]), (x100,)),  # stepwise
        (lambda x, m, p: ebm.hmc_chain(x, "gaussian", 3, 0.1, 3, mean=m, precision=p), (x16, mean16, p16)),
        (lambda x: ebm.hmc_chain(x, "harmonic", 3, 0.1, 3, **PARAMS["harmonic"]), (x5.double(),)),
        (lambda x: ebm.hmc_chain(x, "harmonic", 2, 0.1, 2, **PARAMS["harmonic"]), (x100,)),  # stepwise
    ]
    for i, (fn, args) in enumerate(cases):
        want, got = on_two_gpus(fn, *args)
        for w, g in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
            assert torch.equal(g, w), f"case {i}"

    def in_place(x, g):
        ebm.langevin_step_(x, g, 0.01)
        return x

    want, got = on_two_gpus(in_place, x16, x16.flip(0))
    assert torch.equal(got, want)


@needs_cuda
@pytest.mark.parametrize("model", ["rosenbrock", "ackley"])
def test_cuda_row_tiles_loop_past_the_grid_cap(model):
    # The tile kernels launch one tile of rows per block up to 256 blocks per SM; more rows make
    # the blocks loop (grid-stride). float32, D = 16: 256 rows per tile.
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    B = sms * 256 * 256 + 37
    if torch.cuda.mem_get_info()[0] < 8 * B * 16 * 8:  # ~9 GB: the float64 reference's temporaries
        pytest.skip("needs free GPU memory for the float64 reference")
    x = torch.randn(B, 16, device="cuda")
    params = PARAMS[model]
    assert_close_scaled(ebm.energy(x, model, **params), ref.ENERGIES[model](x.double(), **params), torch.float32)
    assert_close_scaled(ebm.score(x, model, **params), ref.SCORES[model](x.double(), **params), torch.float32)


@pytest.mark.parametrize("op", ["harmonic_energy", "rosenbrock_score", "gaussian_energy"])
def test_rows_wider_than_the_cuda_kernels_index_are_refused(device, op):
    """The local models' CUDA kernel indexed a row in 32 bits: a row of 2^31 elements read nothing and its
    energy came out 0 (session 42's review; 64-bit indices cost that kernel 11-20%). Such rows are refused,
    naming x, on every device alike. Expanded views: nothing is allocated."""
    wide = torch.zeros(1, 1, device=device).expand(1, 2 ** 31)
    args = (torch.zeros(1, device=device).expand(2 ** 31), torch.zeros(1, 1, device=device).expand(2 ** 31, 2 ** 31)) \
        if op == "gaussian_energy" else ()
    with pytest.raises(ValueError, match=r"x must have at most 2147483391 columns"):
        getattr(ebm, op)(wide, *args)
    widest = torch.zeros(1, 1, device=device).expand(1, 2 ** 31 - 257)
    with pytest.raises(ValueError, match="mean"):  # the widest row passes the width check
        ebm.gaussian_energy(widest, torch.zeros(3, device=device), torch.eye(3, device=device))


# ---------------------------------------------------------------- session 40's review

@pytest.mark.parametrize("model", ["banana", "Gaussian"])
def test_energy_and_score_name_an_unknown_model(model):
    for call in (ebm.energy, ebm.score):
        with pytest.raises(ValueError, match=r"model must be one of gaussian, double_well.*got"):
            call(torch.randn(4, 3), model)


def test_a_missing_tensor_is_named():
    x = torch.randn(4, 3)
    with pytest.raises(ValueError, match=r"\bmean must be a tensor, got None"):
        ebm.gaussian_energy(x, None, torch.eye(3))
    with pytest.raises(ValueError, match=r"\bprecision must be a tensor, got None"):
        ebm.score(x, "gaussian", mean=torch.zeros(3))
    with pytest.raises(ValueError, match=r"\bx must be a tensor, got None"):
        ebm.harmonic_energy(None)


def test_small_numbers_in_messages_keep_their_digits():
    """Six fixed decimals printed -1e-9 as -0.000000, and a clamp of (2e-7, 1e-7) as 0.000000 > 0.000000."""
    x = torch.randn(4, 3)
    with pytest.raises(ValueError, match=r"got -1e-09"):
        ebm.langevin_step(x, x, -1e-9)
    with pytest.raises(ValueError, match=r"2e-07.*1e-07"):
        ebm.langevin_step(x, x, 0.1, clamp=(2e-7, 1e-7))


def test_clamp_and_hmc_options_are_refused_by_name():
    x = torch.randn(4, 3)
    torch.testing.assert_close(ebm.langevin_step(x, x, 0.1, 0.0, clamp=torch.tensor(0.5)),
                               ebm.langevin_step(x, x, 0.1, 0.0, clamp=0.5))  # a 0-d tensor is a number
    with pytest.raises(TypeError, match=r"\bclamp must be"):
        ebm.langevin_step(x, x, 0.1, clamp=(1.0, 2.0, 3.0))
    with pytest.raises(TypeError, match=r"hmc_chain takes no clamp"):
        ebm.hmc_chain(x, "harmonic", 2, 0.1, 2, clamp=1.0)
    with pytest.raises(TypeError, match=r"hmc_chain takes no noise_scale"):
        ebm.hmc_chain(x, "harmonic", 2, 0.1, 2, noise_scale=0.5)


# ---------------------------------------------------------------- session 43's review

@pytest.mark.parametrize("call, message", [
    (lambda x: ebm.langevin_step(x, x, 0.1, clamp=math.nan), r"^clamp must be a finite number"),
    (lambda x: ebm.langevin_step(x, x, 0.1, clamp=math.inf), r"^clamp must be a finite number"),
    (lambda x: ebm.langevin_step_(x.clone(), x, 0.1, clamp=(None, math.nan)), r"^clamp's max must be finite"),
    (lambda x: ebm.langevin_chain(x, "harmonic", 1, 0.1, clamp=(-math.inf, 1.0)), r"^clamp's min must be finite"),
    (lambda x: ebm.langevin_chain(x, "harmonic", 1, 0.1, k=math.nan), r"^k must be finite"),
    (lambda x: ebm.hmc_chain(x, "double_well", 1, 0.1, 2, barrier_height=math.inf), r"^barrier_height must be finite"),
    (lambda x: ebm.energy(x, "ackley", c=math.nan), r"^c must be finite"),
])
def test_non_finite_clamp_and_chain_parameters_are_refused_by_their_names(call, message):
    """clamp=nan said "clamp_min must be finite, got -nan" (the op's argument, not the caller's), and a chain's
    model parameter said "params must be finite", naming no parameter."""
    with pytest.raises(ValueError, match=message):
        call(torch.randn(4, 3))


@pytest.mark.parametrize("call", [
    lambda x: ebm.langevin_step(x, x, 0.1, clamp=(2.0, 1.0)),
    lambda x: ebm.langevin_step_(x.clone(), x, 0.1, clamp=(2.0, 1.0)),
    lambda x: ebm.langevin_chain(x, "harmonic", 1, 0.1, clamp=(2.0, 1.0)),
])
def test_a_clamp_whose_min_exceeds_its_max_is_refused_as_clamp(call):
    """clamp=(2, 1) said "clamp: clamp_min (2) must be <= clamp_max (1)": the op's argument names, which the caller
    of the Python face never typed (session 44's message review)."""
    with pytest.raises(ValueError, match=r"^clamp's min must be <= its max, got clamp=\(2\.0, 1\.0\)$"):
        call(torch.randn(4, 3))


@pytest.mark.parametrize("call", [
    lambda x: ebm.langevin_chain(x, "harmonic", 1, 0.1, k="a"),
    lambda x: ebm.hmc_chain(x, "harmonic", 1, 0.1, 2, k=None),
    lambda x: ebm.energy(x, "harmonic", k=None),
    lambda x: ebm.score(x, "harmonic", k=torch.tensor([1.0, 2.0])),
    lambda x: ebm.energy(x, "harmonic", k="2"),
    lambda x: ebm.langevin_chain(x, "harmonic", 1, 0.1, k=True),
])
def test_a_model_parameter_that_is_no_number_is_refused_by_its_name(call):
    """energy(), score() and the chains read model parameters with float(), whose errors named none: "could not
    convert string to float: 'a'", "float() argument must be ... not 'NoneType'", "only one element tensors can be
    converted to Python scalars" (session 44's message review). And k="2" and k=True passed as 2 and 1 (session
    52's review), where harmonic_energy(x, "2") is refused by its schema."""
    with pytest.raises(TypeError, match=r"^k must be a number, got "):
        call(torch.randn(4, 3))


@pytest.mark.parametrize("model", LOCAL)
def test_wide_rows_sum_without_drift_on_the_cpu(model):
    """The CPU loops summed a row's terms (and Ackley's row sums) one after another in float32, so the error grew
    with D: a 3×512×512 row's harmonic energy was off by 4e-4 (torch.sum: 1e-7), and a row of 2^25 ones summed
    to 2^23 instead of 2^24. 16 rows go through the lane-wise loop, the 17th through the row-by-row one."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(17, 2 ** 18, generator=g) + 0.3
    params = PARAMS[model]
    expected = ref.ENERGIES[model](x.double(), **params)
    torch.testing.assert_close(ebm.energy(x, model, **params).double(), expected, rtol=1e-6, atol=0)
    score = ref.SCORES[model](x.double(), **params)
    torch.testing.assert_close(ebm.score(x, model, **params).double(), score, rtol=0, atol=1e-6 * score.abs().max().item())


@pytest.mark.parametrize("D", [16, 255, 1000])
def test_rastrigin_energy_keeps_its_digits_near_the_minimum(device, D):
    """aD + Σ[x² − a·cos 2πx] cancels near x = 0: at x ~ 1e-3 in float32 the energy (~1e-3·D) came out up to 1e-3
    relative off on the CPU (torch's float32 reference: ~1e-4). The kernel sums x² + 2a·sin² πx instead."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(8, D, generator=g) * 1e-3).to(device)
    expected = (x.double() ** 2 + 20.0 * torch.sin(math.pi * x.double()) ** 2).sum(-1)  # a = 10, exact in form
    # CUDA's sin.approx is within ~2^-21 absolute, ~1e-4 relative at these arguments (an H200: 2e-5 off); the
    # cosine form there lost 3-4e-3, as torch.float32 does (H200, session 43 call 4)
    rtol = 2e-6 if device == "cpu" else 1e-4
    torch.testing.assert_close(ebm.rastrigin_energy(x).double(), expected, rtol=rtol, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_ackley_energy_is_zero_at_its_minimum(device, dtype):
    """a + e − a·e^(−b·r) − e^(mean cos cx) cancelled ~22.7 against ~22.7: E(0) came out 9.5e-7 in every dtype but
    float64 (session 52's review)."""
    assert (ebm.ackley_energy(torch.zeros(3, 16, dtype=dtype, device=device)) == 0).all()


@pytest.mark.parametrize("D", [16, 200])
def test_ackley_energy_keeps_its_digits_near_the_minimum(device, D):
    """The same cancellation lost the energy's digits near x = 0 (float32, x ~ 1e-4: 7.5e-3 relative off; x ~ 1e-6:
    half off). The kernel now takes both differences as expm1, of −b·r and of −2·mean sin²(cx/2)."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(8, D, generator=g) * 1e-3).to(device)
    xd = x.double()
    r = xd.square().mean(-1).sqrt()
    expected = -20.0 * torch.expm1(-0.2 * r) - math.e * torch.expm1(-2 * torch.sin(math.pi * xd).square().mean(-1))
    rtol = 2e-6 if device == "cpu" else 1e-4  # CUDA's sin.approx, as for Rastrigin above
    torch.testing.assert_close(ebm.ackley_energy(x).double(), expected, rtol=rtol, atol=0)


# ---------------------------------------------------------------- float arguments given as tensors

_PARAM_CALLS = [(f"{model}_{kind}", name) for model, params in ebm.MODELS.items() if params
                for kind in ("energy", "score") for name in params]


@pytest.mark.parametrize("op, name", _PARAM_CALLS + [("langevin_step", "step_size"), ("langevin_step", "noise_scale"),
                                                     ("energy", "k"), ("score", "k")])
def test_a_float_argument_that_carries_a_derivative_is_refused_by_name(op, name):
    """The schema reads a tensor given for a float as a number: harmonic_energy(x, k) with k an nn.Parameter left
    k.grad None (reference.py's formula gives it one), and a forward-mode dual k gave no tangent. Refused, naming
    the argument; a 0-d tensor that carries no derivative is still a number."""
    x = torch.randn(6, 4, dtype=torch.float64)
    value = torch.tensor(0.5, dtype=torch.float64)

    def call(v):
        if op == "langevin_step":
            torch.manual_seed(0)  # noise_scale 0.5 draws
            kwargs = {"step_size": 0.01, "noise_scale": 0.0, name: v}
            return ebm.langevin_step(x, x, kwargs.pop("step_size"), **kwargs)
        if op in ("energy", "score"):
            return getattr(ebm, op)(x, "harmonic", k=v)
        return getattr(ebm, op)(x, **{name: v})

    torch.testing.assert_close(call(value), call(0.5))
    with pytest.raises(TypeError, match=rf"\b{name}\b"):
        call(value.clone().requires_grad_())
    with torch.no_grad():
        torch.testing.assert_close(call(value.clone().requires_grad_()), call(0.5))
    with torch.autograd.forward_ad.dual_level(), pytest.raises(TypeError, match=rf"\b{name}\b"):
        call(torch.autograd.forward_ad.make_dual(value, torch.ones_like(value)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("B, D", [(4101, 16), (1000, 300)])
@pytest.mark.parametrize("model", LOCAL + ["gaussian"])
def test_cpu_energies_and_scores_do_not_depend_on_the_thread_count(model, B, D, dtype):
    """The CPU takes whole blocks of 16 (the Gaussian: 8) rows lane-wise and the rows left over one at a time, two
    paths that round differently (the lane-wise loops contract a product and a sum into one FMA, the row loop
    does not). The blocks started wherever at::parallel_for cut the batch, so a row's bits depended on
    torch.get_num_threads(): a float32 harmonic energy of (4101, 16) had rows 2048 and 4097 one ulp apart between 1
    and 2 threads. Blocks now start at multiples of the block size whatever the thread count."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(B, D, generator=g, dtype=dtype)
    if model == "gaussian":
        mean = torch.randn(D, generator=g, dtype=dtype)
        a = torch.randn(D, D, generator=g, dtype=dtype)
        precision = a @ a.T / D + torch.eye(D, dtype=dtype)
        calls = (lambda: ebm.gaussian_energy(x, mean, precision), lambda: ebm.gaussian_score(x, mean, precision))
    else:
        calls = (lambda: ebm.energy(x, model, **PARAMS[model]), lambda: ebm.score(x, model, **PARAMS[model]))
    threads = torch.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3, 7):  # more threads than cores is fine: the cuts are what matter
            torch.set_num_threads(n)
            results.append([call() for call in calls])
    finally:
        torch.set_num_threads(threads)
    for n, (energy, score) in zip((2, 3, 7), results[1:]):
        assert torch.equal(energy, results[0][0]), f"energies with {n} threads differ from 1 thread's"
        assert torch.equal(score, results[0][1]), f"scores with {n} threads differ from 1 thread's"


# ---------------------------------------------------------------- session 46's CUDA review

@needs_cuda
@pytest.mark.parametrize("model", LOCAL)
def test_cuda_wide_rows_sum_without_drift(model):
    """The CUDA lane-group kernel (rows wider than 8 vectors) summed each lane's D/32 terms (and Ackley's row sums)
    one after another in float32, so the error grew with D as the CPU's did before session 43: a constant 3x512x512
    row's energies were 4e-5 to 9e-5 off (Ackley's score 3e-5), torch.sum 1e-7. Each chunk's sum is now added in
    double. (The bar leaves room for the MUFU sine and cosine of Rastrigin and Ackley, ~5e-6 on a constant row.)"""
    x = torch.full((2, 3 * 512 * 512), 0.1, device="cuda")
    params = PARAMS[model]
    expected = ref.ENERGIES[model](x.double(), **params)
    torch.testing.assert_close(ebm.energy(x, model, **params).double(), expected, rtol=1e-5, atol=0)
    score = ref.SCORES[model](x.double(), **params)
    torch.testing.assert_close(ebm.score(x, model, **params).double(), score, rtol=1e-5,
                               atol=1e-5 * score.abs().max().item())


# ---------------------------------------------------------------- session 46's API review

def test_langevin_chain_names_hmc_options_it_does_not_take():
    """hmc_chain names langevin_chain's clamp/noise_scale as not its own; the other way round, langevin_chain
    given hmc_chain's n_leapfrog (a researcher switching samplers, or distributed_chain(sampler="langevin",
    n_leapfrog=...)) blamed the model: "model 'harmonic' takes ['k'], not ['n_leapfrog']"."""
    x = torch.randn(4, 3)
    with pytest.raises(TypeError, match=r"langevin_chain takes no n_leapfrog \(hmc_chain's option\)"):
        ebm.langevin_chain(x, "harmonic", 2, 0.1, n_leapfrog=5)
    with pytest.raises(TypeError, match=r"langevin_chain takes no n_leapfrog"):
        ebm.langevin_chain(x, "gaussian", 2, 0.1, mean=torch.zeros(3), precision=torch.eye(3), n_leapfrog=5)


@pytest.mark.parametrize("clamp", [False, True])
def test_a_bool_clamp_is_refused(clamp):
    """A bool is a number to Python: clamp=False (meant as "no clamp") clamped every value to [0, 0], and
    clamp=True to [-1, 1], silently."""
    x = torch.randn(4, 3)
    for call in (lambda: ebm.langevin_step(x, x, 0.1, clamp=clamp), lambda: ebm.langevin_step_(x.clone(), x, 0.1, clamp=clamp),
                 lambda: ebm.langevin_chain(x, "harmonic", 2, 0.1, clamp=clamp)):
        with pytest.raises(TypeError, match=rf"^clamp must be None, .* got {clamp} \(for no clamp, pass None\)$"):
            call()


# ---------------------------------------------------------------- mutation review (mutebm): gaps the mutants found

def test_mutebm_hmc_one_step_matches_the_reference_in_distribution(device):
    """One HMC step from a fixed point with a step so large that 13% of the proposals are rejected: the acceptance
    rate and the mean of the result against reference.hmc_chain. The HMC tests above accept nearly everything, so
    an accept uniform drawn from a momentum's Philox word (the CPU kernel reading words[4 (calls k + nq - 1)]: u
    then follows the momentum's radius, and this case accepts 100%) passed them all."""
    torch.manual_seed(12)
    start = torch.tensor([1.5, -0.5], dtype=torch.float64)
    n, n_ref = 1 << 16, 1 << 18
    out, accept = ebm.hmc_chain(start.to(device).expand(n, 2).contiguous(), "harmonic", 1, 1.2, 3, k=1.0)
    ref_out, ref_accept = ref.hmc_chain(start.expand(n_ref, 2), ref.harmonic_energy, ref.harmonic_score, 1, 1.2, 3)
    out, accept = out.cpu(), accept.cpu()
    assert abs(ref_accept.mean() - 0.87) < 0.01  # far from 1: the accept test matters here
    p = ref_accept.mean()
    se = math.sqrt(p * (1 - p) * (1 / n + 1 / n_ref))
    assert abs(accept.mean() - p) < 5 * se, (accept.mean(), p)
    se = torch.sqrt(out.var(0) / n + ref_out.var(0) / n_ref)
    assert ((out.mean(0) - ref_out.mean(0)).abs() < 5 * se).all(), (out.mean(0), ref_out.mean(0))


def test_mutebm_langevin_step_in_place_with_grad_one_element_behind_x(device):
    """grad that shares x's memory one element behind it: writing x[i] changes grad[i + 1] before it is read, so
    it must be copied first. test_inplace_target_must_not_overlap has grad one element ahead, which a forward loop
    reads before writing it: with ebm.cpp's copy dropped (aliased = false) it passed and this case came out wrong."""
    buf = torch.randn(4001, dtype=torch.float64, device=device)
    y, g = buf[1:].view(-1, 8), buf[:-1].view(-1, 8)
    expected = y - 0.1 * g
    ebm.langevin_step_(y, g, 0.1, 0.0)
    torch.testing.assert_close(y, expected)


@pytest.mark.parametrize("call", [
    lambda x: ebm.langevin_step(x, x, 0.1, math.inf),
    lambda x: ebm.langevin_step_(x.clone(), x, 0.1, math.inf),
    lambda x: ebm.langevin_chain(x, "harmonic", 2, 0.1, math.inf),
    lambda x: ebm.langevin_chain(x, "harmonic", 2, 0.1, -1.0),
])
def test_mutebm_an_infinite_or_negative_noise_scale_is_refused_by_name(call):
    """The bad-input tests give noise_scale NaN and -1 to langevin_step only: without ebm.cpp's isfinite check,
    noise_scale=inf was accepted (every output inf or NaN) and no test failed."""
    with pytest.raises(ValueError, match=r"^noise_scale must be finite and >= 0"):
        call(torch.randn(4, 3))


@pytest.mark.parametrize("model, D", [("gaussian", 8), ("gaussian", 80), ("harmonic", 80)])
def test_mutebm_clamp_holds_on_every_chain_path(device, model, D):
    """clamp on the row-per-task chains and on the step-by-step one (Gaussian rows wider than 64 on the CPU). The
    clamp tests above use harmonic rows of 4 only: a step-by-step chain that dropped the clamp (ebm_chains.cpp's
    along_score with clamp false) passed them."""
    torch.manual_seed(13)
    x = 3 * torch.randn(64, D, device=device)
    params = dict(mean=torch.full((D,), 2.0, device=device), precision=torch.eye(D, device=device)) \
        if model == "gaussian" else dict(k=0.1)
    out, traj = ebm.langevin_chain(x, model, 6, 0.05, thin=2, clamp=(-0.5, 1.0), **params)
    assert out.min() >= -0.5 and out.max() <= 1.0 and traj.min() >= -0.5 and traj.max() <= 1.0
    assert (out == 1.0).any()  # the mean at 2 pushes rows to the upper bound


# Every scalar parameter away from its default: PARAMS keeps rosenbrock's a and all of ackley's at theirs, so a
# kernel that ignored them (ebm.h's Rosenbrock with a fixed at 1) passed every test.
_AWAY_FROM_DEFAULTS = {"double_well": dict(barrier_height=0.7, b=1.3), "harmonic": dict(k=0.3),
                       "rosenbrock": dict(a=-0.5, b=3.0), "rastrigin": dict(a=2.5), "ackley": dict(a=7.0, b=0.6, c=2.5)}


@pytest.mark.parametrize("model", LOCAL)
def test_mutebm_every_model_parameter_away_from_its_default_reaches_the_kernels(device, model):
    params = _AWAY_FROM_DEFAULTS[model]
    assert all(params[name] != default for name, default in ebm.MODELS[model].items())
    x = torch.randn(19, 5, dtype=torch.float64, device=device)  # on the CPU 16 rows lane-wise, 3 row by row
    torch.testing.assert_close(ebm.energy(x, model, **params), ref.ENERGIES[model](x, **params), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(ebm.score(x, model, **params), ref.SCORES[model](x, **params), rtol=1e-9, atol=1e-9)
    expected = x  # the chains build the model from the same parameters
    for _ in range(3):
        expected = expected + 0.01 * ref.SCORES[model](expected, **params)
    torch.testing.assert_close(ebm.langevin_chain(x, model, 3, 0.01, 0.0, **params), expected, rtol=1e-9, atol=1e-9)



def test_mutebm_langevin_step_derivatives_are_zero_where_clamped(device):
    """A clamped element equals its bound exactly, so the mask of ops.py's _inside_bounds must be strict: with
    out >= lo the elements clamped at the lower bound kept derivative 1 (and -step_size in grad). The autograd
    tests compare our backward with itself through other transforms, so none saw it. Forward mode with a tangent
    for grad too, so that the sign of its term counts."""
    x = torch.tensor([[-3.0, -0.5, 0.2, 3.0]], dtype=torch.float64, device=device, requires_grad=True)
    g = torch.full_like(x, 0.5).requires_grad_()
    y = ebm.langevin_step(x, g, 0.1, 0.0, clamp=(-1.0, 1.0))
    torch.testing.assert_close(y, torch.tensor([[-1.0, -0.55, 0.15, 1.0]], dtype=torch.float64, device=device))
    inside = torch.tensor([[0.0, 1.0, 1.0, 0.0]], dtype=torch.float64, device=device)
    gx, gg = torch.autograd.grad(y.sum(), (x, g))
    assert torch.equal(gx, inside) and torch.equal(gg, -0.1 * inside)
    with torch.autograd.forward_ad.dual_level():  # forward mode, x's and grad's tangents ones: (1 - 0.1) inside
        fwd = torch.autograd.forward_ad
        y = ebm.langevin_step(fwd.make_dual(x.detach(), torch.ones_like(x)), fwd.make_dual(g.detach(), torch.ones_like(g)),
                              0.1, 0.0, clamp=(-1.0, 1.0))
        torch.testing.assert_close(fwd.unpack_dual(y).tangent, 0.9 * inside)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("D", [40_000, 40_001])  # 16-byte vectors, and single elements (an odd row)
@pytest.mark.parametrize("model", LOCAL)
def test_cuda_few_wide_rows_are_cut_into_runs(model, D, dtype):
    """A batch of a few wide rows (3 rows of 40000) is cut into runs, a warp each (one warp a row left most of
    the GPU idle: 64 rows of 3x512x512 took 2.5 ms, eager 0.18): energies from the runs' partial sums, scores
    (Rosenbrock's neighbours across the runs' ends, Ackley's row statistics from every run) against the float64
    reference, and a row alone equal to the same row among the others."""
    g = torch.Generator().manual_seed(7)
    x = (torch.randn(3, D, generator=g, dtype=torch.float64) * 1.5).to("cuda", dtype)
    params = PARAMS[model]
    xd = x.double()
    tol = dict(rtol=1e-5, atol=0) if dtype == torch.float32 else dict(rtol=2e-2, atol=0)
    torch.testing.assert_close(ebm.energy(x, model, **params).double(), ref.ENERGIES[model](xd, **params), **tol)
    score, want = ebm.score(x, model, **params).double(), ref.SCORES[model](xd, **params)
    scale = want.abs().max().item()
    torch.testing.assert_close(score, want, rtol=tol["rtol"], atol=tol["rtol"] * scale)
    assert torch.equal(ebm.energy(x[1:2], model, **params), ebm.energy(x, model, **params)[1:2])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_half_score_backward_differentiates_in_float32(device, dtype):
    """A score's backward differentiates reference.py's formula with float16/bfloat16 x taken to float32, as the
    kernels compute (the ebm mutation review's one survivor: a backward in the half type went unnoticed). Near
    |x| = 50, 2πx in float16 keeps a quarter radian, so cos 2πx in the half type is off by up to ~0.1: the
    derivative -(2 + 4π²a cos 2πx) by up to ~50."""
    x_half = torch.tensor([50.3, -49.7, 50.05, 51.45, -50.8, 49.35], dtype=dtype).repeat(4, 1).to(device)
    x = x_half.clone().requires_grad_()
    ebm.score(x, "rastrigin").sum().backward()
    x64 = x_half.double().requires_grad_()
    ref.SCORES["rastrigin"](x64).sum().backward()
    spacing = 2.0 if dtype == torch.bfloat16 else 0.25  # the half type's spacing at 256..512, where the result is
    torch.testing.assert_close(x.grad.double(), x64.grad, rtol=0, atol=spacing)


# ---------------------------------------------------------------- session 47: the CPU chains in vector lanes

CPU_CHAIN_WIDTHS = [1, 2, 3, 5, 64, 65]  # 64: the widest rows in lanes; 65: a row at a time


def _cpu_chain(sampler, x, n_steps, seed, **kw):
    g = torch.Generator().manual_seed(seed)
    if sampler == "langevin":
        return ebm.langevin_chain(x, "double_well", n_steps, 0.01, generator=g, **kw)
    return ebm.hmc_chain(x, "double_well", n_steps, 0.1, 3, generator=g, **kw)


@pytest.mark.parametrize("D", CPU_CHAIN_WIDTHS)
def test_cpu_langevin_noise_is_fresh_for_every_step_element_and_row(D):
    """With no force (harmonic, k = 0) a Langevin step adds only its noise, sqrt(2 eta) z: every increment of
    the trajectory is one normal. Since session 47 the CPU reads a row's normals in one flat stream (D a step,
    a Philox call serving several steps when D < 4), for 16 rows at a time: a normal read twice, or a lane
    reading its neighbour's, would correlate neighbouring steps, elements or rows."""
    B, n_steps, eta = max(16, 24000 // (D * 12)), 12, 0.125
    x = torch.randn(B, D, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    _, traj = ebm.langevin_chain(x, "harmonic", n_steps, eta, thin=1, k=0.0,
                                 generator=torch.Generator().manual_seed(4))
    z = torch.diff(torch.cat([x[None], traj]), dim=0) / math.sqrt(2 * eta)  # (n_steps, B, D)
    n = z.numel()
    assert abs(z.mean().item()) < 5 / math.sqrt(n) and abs(z.var().item() - 1) < 5 * math.sqrt(2 / n)

    def corr(a, b):
        a, b = a.flatten(), b.flatten()
        return ((a * b).mean() / (a.std() * b.std())).item()

    bound = 5 / math.sqrt(n / 2)  # ~5 standard errors of a correlation over about n / 2 pairs
    for lag in (1, 2, 3, 4):  # steps that share a Philox call (D < 4), and neighbouring calls
        assert abs(corr(z[lag:], z[:-lag])) < bound, lag
    assert abs(corr(z[:, 1:], z[:, :-1])) < bound  # row after row (neighbouring lanes)
    if D > 1:
        assert abs(corr(z[..., 1:], z[..., :-1])) < bound  # element after element


@pytest.mark.parametrize("sampler", ["langevin", "hmc"])
@pytest.mark.parametrize("D", CPU_CHAIN_WIDTHS)
def test_cpu_chain_rows_do_not_depend_on_the_rows_after_them(sampler, D):
    """Rows go 16 (the Gaussian 8) at a time through vector lanes: the first 21 rows of a batch of 40 (two
    whole blocks and a bit) equal a batch of those 21 alone (a block of 5 rows and 11 empty lanes), with
    their trajectories and acceptance rates; and a chain of 5 steps is the first 5 steps of a chain of 12 on
    the same seed (the accept uniforms of HMC do not depend on n_steps)."""
    x = torch.randn(40, D, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    whole, part = _cpu_chain(sampler, x, 12, 6, thin=4), _cpu_chain(sampler, x[:21], 12, 6, thin=4)
    assert all(t.isfinite().all() for t in whole)
    for got, want in zip(part, whole):
        assert torch.equal(got, want[..., :21, :] if got.dim() > 1 else want[:21])
    short = _cpu_chain(sampler, x, 5, 6)
    longer_traj = _cpu_chain(sampler, x, 12, 6, thin=5)[-1]
    assert torch.equal(short if sampler == "langevin" else short[0], longer_traj[0])


@pytest.mark.parametrize("model", ["gaussian", "rosenbrock", "ackley"])
@pytest.mark.parametrize("D", [2, 64, 65])
def test_cpu_chains_in_lanes_are_the_row_by_row_maths(model, D):
    """Without noise a Langevin chain is gradient descent: the lanes (D <= 64) and the row-by-row loop (D = 65)
    against the reference's steps, the Gaussian (8 lanes) and two local models with row-wide terms."""
    x = torch.randn(21, D, dtype=torch.float64, generator=torch.Generator().manual_seed(7)) * 0.5
    if model == "gaussian":
        g = torch.Generator().manual_seed(8)
        mean = torch.randn(D, dtype=torch.float64, generator=g)
        a = torch.randn(D, D, dtype=torch.float64, generator=g)
        kw = dict(mean=mean, precision=a @ a.T / D + torch.eye(D, dtype=torch.float64))
        score = lambda y: ref.gaussian_score(y, kw["mean"], kw["precision"])
    else:
        kw = PARAMS[model]
        score = lambda y: ref.SCORES[model](y, **kw)
    got = ebm.langevin_chain(x, model, 6, 1e-3, noise_scale=0.0, **kw)
    want = x
    for _ in range(6):
        want = want + 1e-3 * score(want)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cpu_chain_lanes_and_rows_draw_the_same_stream(dtype):
    """A row's normals are one flat stream, D a step: the first step's first 64 normals are the same for D = 64
    (the lanes, where 16 rows make each Philox call side by side, AVX2 where built) and D = 65 (a row at a
    time, a row's calls in a run), so the lanes' word-major Philox and Box-Muller are checked bit for bit
    against the row-major ones (no force: the step adds sqrt(2 eta) z alone)."""
    def first_step(D):
        x = torch.zeros(20, D, dtype=dtype)
        return ebm.langevin_chain(x, "harmonic", 2, 0.5, k=0.0, thin=1, generator=torch.Generator().manual_seed(3))[1][0]
    lanes, rows = first_step(64), first_step(65)
    assert lanes.std() > 0.5 and torch.equal(lanes, rows[:, :64])
def test_ackley_float32_exponent_past_88_is_not_clamped():
    """jk::exp_float (the CPU's float exp) clamped its argument at 88, so Ackley with b < 0 (exp(-b·r) grows) gave
    -1.65e38 for every row with -b·r in (88, 88.72] (float's exp reaches 3.3e38 there: up to 2x off) and a finite
    energy where float overflows to -inf; the CUDA kernels (std::exp) and the reference did not clamp."""
    r = torch.tensor([87.9, 88.3, 88.7])
    x = r[:, None].expand(3, 4).contiguous()
    want = ref.ENERGIES["ackley"](x.double(), 1.0, -1.0, 2 * math.pi).float()
    torch.testing.assert_close(ebm.ackley_energy(x, a=1.0, b=-1.0), want, rtol=1e-6, atol=0)
    assert ebm.ackley_energy(torch.full((1, 4), 89.0), a=1.0, b=-1.0).item() == -math.inf
    x = x[:2] + 0.25  # e^(88.95) itself overflows float, as std::exp's on CUDA
    torch.testing.assert_close(ebm.ackley_score(x, a=1.0, b=-1.0),
                               ref.SCORES["ackley"](x.double(), 1.0, -1.0, 2 * math.pi).float(), rtol=1e-5, atol=0)


# ---------------------------------------------------------------- CUDA chains at D = 1, 2: the flat stream (session 48)
# At D = 1 and 2 a CUDA chain's row reads its normals as one flat stream, normal k = s·D + i lane k % 4 of Philox
# call k / 4, one call serving 4 / D steps (ChainDraws, ebm_rows.cuh); HMC's accept uniforms are another
# subsequence. With no force (harmonic, k = 0) a step only adds noise: a Langevin step sqrt(2 eta) z = 0.5 z, an
# HMC step of one leapfrog step eps p = 0.5 p (always accepted: the energy does not change), so in float64 the
# trajectory's increments are the normals themselves (to ~1e-15).

def _cuda_noise_chain(sampler, x, n_steps, seed, **kw):
    """A chain with no force on the GPU: returns its result tuple ((out, traj) or (out, accept, traj) with thin)."""
    g = torch.Generator("cuda").manual_seed(seed)
    if sampler == "langevin":
        result = ebm.langevin_chain(x, "harmonic", n_steps, 0.125, generator=g, k=0.0, **kw)
        return result if isinstance(result, tuple) else (result,)
    out = ebm.hmc_chain(x, "harmonic", n_steps, 0.5, 1, generator=g, k=0.0, **kw)
    assert out[1].mean().item() > 0.999  # every proposal accepted (but where a uniform is exactly 1)
    return out


def _chain_normals(x, traj):
    """The normals of a no-force chain, (n_steps, B, D), from x and its trajectory (thin = 1)."""
    return (torch.diff(torch.cat([x[None], traj]), dim=0) / 0.5).cpu()


def _assert_fresh_every_step(z):
    """No row repeats an element's normal from one step to the next (independent normals are that close, 1e-9,
    with probability ~1e-8 a pair, float32's grid included): the kill of a cursor that reads one call twice."""
    repeats = ((z[1:] - z[:-1]).abs() < 1e-9).sum().item()
    assert repeats <= 2, f"{repeats} of {z[1:].numel()} consecutive steps drew the same normal"


def _corr(a, b):
    a, b = a.flatten().double(), b.flatten().double()
    return ((a * b).mean() / (a.std() * b.std())).item()


@needs_cuda
@pytest.mark.parametrize("sampler", ["langevin", "hmc"])
@pytest.mark.parametrize("D", [1, 2])
def test_cuda_flat_chain_normals_are_fresh_standard_and_uncorrelated(sampler, D):
    """Every step's increment is a new N(0, 1) normal (variance 2 eta for Langevin): mean 0, variance 1, no
    correlation at steps 1-4 apart (steps sharing one Philox call, and neighbouring calls), nor in a row's flat
    stream 1-4 normals apart (a cursor shifted by the wrong count reads a lane twice), nor between the elements
    of a step, nor between neighbouring rows; and no normal repeated from one step to the next."""
    B, n_steps = 16384, 16
    x = torch.zeros(B, D, dtype=torch.float64, device="cuda")
    z = _chain_normals(x, _cuda_noise_chain(sampler, x, n_steps, 11, thin=1)[-1])
    n = z.numel()
    assert z.shape == (n_steps, B, D)
    assert abs(z.mean().item()) < 5 / math.sqrt(n) and abs(z.var().item() - 1) < 5 * math.sqrt(2 / n)
    bound = 5 / math.sqrt(n / 2)  # ~5 standard errors of a correlation over about n / 2 pairs
    for lag in (1, 2, 3, 4):
        assert abs(_corr(z[lag:], z[:-lag])) < bound, ("steps", lag)
        flat = z.permute(1, 0, 2).reshape(B, n_steps * D)  # a row's normals in stream order
        assert abs(_corr(flat[:, lag:], flat[:, :-lag])) < bound, ("stream", lag)
    assert abs(_corr(z[:, 1:], z[:, :-1])) < bound  # row after row
    if D == 2:
        assert abs(_corr(z[..., 1], z[..., 0])) < bound  # element after element
    _assert_fresh_every_step(z)


@needs_cuda
@pytest.mark.parametrize("sampler", ["langevin", "hmc"])
@pytest.mark.parametrize("D", [1, 2])
def test_cuda_flat_chain_of_n_steps_is_the_start_of_a_longer_one(sampler, D):
    """A chain of n steps is bit for bit the first n steps of a chain of n + 5 on the same seed, n on and off the
    Philox calls' boundaries (a call serves 4 / D steps), its trajectory too; and the longer chain's steps
    each drew new normals."""
    x = torch.randn(1000, D, dtype=torch.float64, device="cuda")
    for n in (1, 2, 3, 5, 6):
        longer = _cuda_noise_chain(sampler, x, n + 5, 12, thin=1)[-1]
        short, short_traj = (lambda r: (r[0], r[-1]))(_cuda_noise_chain(sampler, x, n, 12, thin=1))
        assert torch.equal(short, longer[n - 1]) and torch.equal(short_traj, longer[:n]), n
        _assert_fresh_every_step(_chain_normals(x, longer))


@needs_cuda
@pytest.mark.parametrize("sampler", ["langevin", "hmc"])
@pytest.mark.parametrize("D", [1, 2])
def test_cuda_flat_chain_rows_are_independent_streams(sampler, D):
    """Row r draws from subsequence r whatever the batch: the first 150 rows of 300 (a block takes 128) equal a
    batch of those 150 alone; and neighbouring rows' normals are neither equal nor correlated, each row's fresh."""
    x = torch.zeros(300, D, dtype=torch.float64, device="cuda")
    whole = _cuda_noise_chain(sampler, x, 12, 13, thin=1)
    part = _cuda_noise_chain(sampler, x[:150], 12, 13, thin=1)
    assert torch.equal(part[0], whole[0][:150]) and torch.equal(part[-1], whole[-1][:, :150])
    z = _chain_normals(x, whole[-1])
    assert ((z[:, 1:] - z[:, :-1]).abs() < 1e-9).sum().item() <= 2  # no row copies its neighbour's normals
    assert abs(_corr(z[:, 1:], z[:, :-1])) < 5 / math.sqrt(z.numel() / 2)
    _assert_fresh_every_step(z)


@needs_cuda
@pytest.mark.parametrize("D", [1, 2])
def test_cuda_flat_chains_keep_their_exact_stationary_variance(D):
    """On a harmonic well ½k x² started at its stationary law, ULA keeps exactly variance 1 / (k (1 - k eta / 2))
    and HMC exactly 1 / k (its accept test draws uniforms apart from the momenta): float32, the flat stream's
    kernels. Checked at 5 standard errors; the two variances are > 20 apart, and so is HMC without its
    Metropolis test (the leapfrog's own invariant law, 1 / (k (1 - k eps² / 4)) = 1.68 / k here; at k eps² = 1 and
    3 leapfrog steps it would be exact, a half turn)."""
    B, k, eta, eps = 100000, 2.0, 0.4, 0.9
    g = torch.Generator("cuda").manual_seed(14)
    for name, v in (("langevin", 1 / (k * (1 - k * eta / 2))), ("hmc", 1 / k)):
        x0 = math.sqrt(v) * torch.randn(B, D, device="cuda", generator=g)
        if name == "langevin":
            out = ebm.langevin_chain(x0, "harmonic", 20, eta, generator=g, k=k)
        else:
            out, accept = ebm.hmc_chain(x0, "harmonic", 20, eps, 3, generator=g, k=k)
            assert 0.5 < accept.mean().item() < 0.99
        out = out.double().cpu()
        se = v * math.sqrt(2 / out.numel())
        assert abs((out ** 2).mean().item() - v) < 5 * se, name
        assert abs(out.mean().item()) < 5 * math.sqrt(v / out.numel()), name
        if D == 2:
            assert abs(_corr(out[:, 0], out[:, 1])) < 5 / math.sqrt(B), name


def _lag_correlations(decisions):
    """Correlations of a (B, steps) record between steps 1, 2 and 3 apart, pooled over the rows."""
    return [torch.corrcoef(torch.stack([decisions[:, lag:].flatten(), decisions[:, :-lag].flatten()]))[0, 1].item()
            for lag in (1, 2, 3)]


def _fresh_uniform_hmc_accepts(B, D, n_steps, eps):
    """Accept decisions (B, n_steps) of reference.py's eager HMC (torch's fresh uniform every step), one leapfrog
    step on ½|x|², a step at a time."""
    x = torch.randn(B, D, dtype=torch.float64)
    decisions = []
    for _ in range(n_steps):
        x, accepted = ref.hmc_chain(x, ref.harmonic_energy, ref.harmonic_score, 1, eps, 1)
        decisions.append(accepted)
    return torch.stack(decisions, 1)


@pytest.mark.parametrize("D", [1, 2, 3])
def test_hmc_accept_decisions_are_as_independent_as_with_fresh_uniforms(device, D):
    """HMC's accept test takes a fresh uniform every step, apart from the momenta. With one leapfrog step on a
    harmonic well (acceptance 25-55%), whether a chain accepts at step s and at step s + lag is correlated only
    through its state: at lags 1-3 as much as in an eager run with torch's fresh uniforms (0.01-0.04). A uniform
    reused for 2 or 4 steps (a flat stream's cursor gone wrong) adds 0.04-0.08 at lag 1 in that eager run, where
    the bound is 0.015 (the difference's standard error: ~0.002)."""
    B, n_steps, eps = 8192, 64, 1.9
    x = torch.randn(B, D, dtype=torch.float64, generator=torch.Generator().manual_seed(5)).to(device)
    g = torch.Generator(device).manual_seed(6)
    _, _, traj = ebm.hmc_chain(x, "harmonic", n_steps, eps, 1, thin=1, generator=g, k=1.0)
    states = torch.cat([x[None], traj]).cpu()
    ours = (states[1:] != states[:-1]).any(-1).T.double()  # a rejected step leaves the row as it was
    fresh = _fresh_uniform_hmc_accepts(B, D, n_steps, eps)
    assert abs(ours.mean().item() - fresh.mean().item()) < 0.01
    for lag, (a, b) in enumerate(zip(_lag_correlations(ours), _lag_correlations(fresh)), 1):
        assert abs(a - b) < 0.015, (lag, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("D", [1, 2])
def test_chains_at_d1_and_d2_follow_every_model(device, dtype, D):
    """The CUDA chains at D = 1 and 2 are kernels of their own since session 48 (D a compile-time constant; HMC's
    leapfrog loops cut to the D elements for the local models): without noise Langevin is the reference's
    gradient descent for every model, its trajectory too; HMC with short leapfrog steps accepts nearly every
    proposal and moves every chain (a wrong or missing gradient, or a leapfrog that skips an element, fails)."""
    for model in ["gaussian"] + LOCAL:
        if model == "rosenbrock" and D == 1:
            continue  # needs two elements
        params, score = chain_model(model, D, dtype, device)
        x = 0.5 * torch.randn(300, D, dtype=torch.float64).to(device, dtype)
        step = 0.002 if model in ("rosenbrock", "rastrigin") else 0.02
        out, traj = ebm.langevin_chain(x, model, 10, step, 0.0, thin=5, **params)
        expected = ref.langevin_chain(x.double(), score, 10, step, 0.0, thin=5)
        tol = 1e-9 if dtype == torch.float64 else 1e-4
        torch.testing.assert_close(out.double(), expected[0], rtol=tol, atol=tol, msg=lambda m: f"{model}: {m}")
        torch.testing.assert_close(traj.double(), expected[1], rtol=tol, atol=tol, msg=lambda m: f"{model}: {m}")
        out, accept = ebm.hmc_chain(x, model, 20, 0.02, 10, **params)
        assert accept.mean().item() > 0.97 and out.isfinite().all(), model
        assert ((out - x).abs() > 0).all(-1).double().mean().item() > 0.9, model


def test_ackley_float32_finite_products_of_an_overflowing_exp(device):
    """With b < 0, e^(-b·r) overflows float32 past -b·r = 88.72 while Ackley's energy −a·e^(-b·r) (|a| < 1) and
    score terms a·b·e^(-b·r)·xᵢ/(r·D) are still finite a little further: the float kernels took e^(-b·r) alone
    first and gave ±inf there (CPU and CUDA alike). Float64's reference is the oracle."""
    g = torch.Generator().manual_seed(11)
    r = torch.linspace(88.8, 89.7, 6, dtype=torch.float64)  # -b·r for b = -1
    x = (r[:, None] * (1 + 0.01 * torch.randn(6, 16, dtype=torch.float64, generator=g))).float()
    for name, kw in (("energy", dict(a=0.25, b=-1.0)), ("score", dict(a=2.0, b=-1.0))):
        want = getattr(ref, f"ackley_{name}")(x.double(), **kw)
        assert want.float().isfinite().all() and want.abs().max() > 3.5e38 / 16  # finite in float32, past e^88.72 / D
        got = getattr(ebm, f"ackley_{name}")(x.to(device), **kw).cpu()
        assert got.isfinite().all(), f"ackley_{name} on {device}: {got}"
        torch.testing.assert_close(got.double(), want, rtol=2e-5, atol=0, msg=lambda m: f"ackley_{name}: {m}")


def test_ackley_float32_exp_below_minus_87_is_not_clamped(device):
    """Ackley's score factor a·b·e^(-b·r)/(r·D) was taken with e^(-b·r) alone, which leaves float's normal range
    below -87.3: on the CPU jk::exp_float clamped its argument at -87 (e^-87 = 1.6e-38 for every smaller one), and a
    subnormal e^t (CUDA's) keeps few digits, where the factor itself is a normal float for a large a·b. With c = 0
    the score is that term alone: up to 3000x off at b·r = 95 (float64's reference is the oracle)."""
    r = torch.linspace(86.0, 95.0, 10, dtype=torch.float64)
    x = (r[:, None] * torch.tensor([1.0, -1.0, 1.0, 1.0], dtype=torch.float64)).float()  # rms = r, D = 4
    want = ref.ackley_score(x.double(), a=1e6, b=1.0, c=0.0)
    assert want.abs().min() > 1.2e-38  # normal floats
    got = ebm.ackley_score(x.to(device), a=1e6, b=1.0, c=0.0).cpu()
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=0)
    # Where even e^(b·r / 2) is past float's range the result is 0 (float64's 1.4e-49), not e^-87·e^-87·a·b/D.
    far = torch.full((1, 1), 200.0, device=device)
    assert ref.ackley_score(far.double().cpu(), a=1e38, b=1.0, c=0.0).float().item() == 0.0
    assert ebm.ackley_score(far, a=1e38, b=1.0, c=0.0).item() == 0.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("D", [3000, 5000])
@pytest.mark.parametrize("model", LOCAL)
def test_cpu_wide_rows_energies_and_scores_do_not_depend_on_the_thread_count(model, D, dtype):
    """Session 44 made the CPU's blocks of 16 lane-wise rows start at multiples of 16 whatever the thread count
    (test_cpu_energies_and_scores_do_not_depend_on_the_thread_count), but only where a task holds 16 rows or more
    (D <= 2048): wider rows were split where at::parallel_for cut the batch, so a row went lane-wise or row by row
    (two roundings) by torch.get_num_threads(), and its energy or score moved by an ulp. (Not the Gaussian: past
    D = 64 it goes through torch's matmul, whose BLAS gave other bits with 1, 2 and 3 threads on the 16-CPU GPU
    host, session 48 call 3, though not on the dev machine: as torch's own matmul does.)"""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(37, D, generator=g, dtype=dtype)  # two whole blocks and 5 rows
    calls = (lambda: ebm.energy(x, model, **PARAMS[model]), lambda: ebm.score(x, model, **PARAMS[model]))
    threads = torch.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            results.append([call() for call in calls])
    finally:
        torch.set_num_threads(threads)
    for n, (energy, score) in zip((2, 3), results[1:]):
        assert torch.equal(energy, results[0][0]), f"{model} energies at D = {D} with {n} threads differ from 1's"
        assert torch.equal(score, results[0][1]), f"{model} scores at D = {D} with {n} threads differ from 1's"


def test_hmc_chain_stepwise_never_accepts_a_proposal_it_must_reject():
    """The stepwise route (CPU Gaussian rows wider than 64) drew its Metropolis uniform with torch.rand, which gives
    an exact 0 one draw in 2^24 in float32: log 0 = -inf accepted any proposal (session 52's review). Under seed 313
    the first step's uniform of row 2220 is that 0 (checked below), and every proposal here has h1 ~ 1e11 above h0."""
    B, D = 65536, 65
    g = torch.Generator().manual_seed(313)  # the route's draws: the momenta, then the uniforms
    torch.randn(B, D, generator=g)
    assert torch.rand(B, generator=g)[2220] == 0, "the premise of this test changed: find another seed"
    torch.manual_seed(313)
    out, acceptance = ebm.hmc_chain(torch.zeros(B, D), "gaussian", 1, 1e3, 1, mean=torch.zeros(D),
                                    precision=torch.eye(D))
    assert acceptance.sum() == 0 and (out == 0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_wide_gaussian_reads_no_uninitialised_memory(device, dtype):
    """Rows wider than the row kernels' 64 take a matrix product into an uninitialised buffer with beta = 0
    (session 53: the ½ rides on the product's alpha). Blocks full of NaN freed just before are what the
    allocator hands out next, so a product that read its buffer would show NaN here."""
    B, D = 48, 100
    x = torch.randn(B, D, device=device, dtype=dtype)
    mean = torch.randn(D, device=device, dtype=dtype)
    a = torch.randn(D, D, device=device, dtype=torch.float64)
    precision = (a @ a.T / D + torch.eye(D, device=device, dtype=torch.float64)).to(dtype)
    atol, rtol = TOLERANCES[dtype]
    for op, reference in ((ebm.gaussian_energy, ebm.reference.gaussian_energy),
                          (ebm.gaussian_score, ebm.reference.gaussian_score)):
        junk = [torch.full((B, D), float("nan"), device=device, dtype=dtype) for _ in range(3)]
        del junk
        out = op(x, mean, precision)
        assert not out.isnan().any()
        expected = reference(x.double(), mean.double(), precision.double())
        scale = 1.0 if op is ebm.gaussian_score else D  # an energy sums D products
        torch.testing.assert_close(out.double(), expected, atol=atol * scale, rtol=rtol)


@pytest.mark.parametrize("chain", ["langevin", "hmc"])
@pytest.mark.parametrize("D", [1, 300])
def test_a_chain_longer_than_its_random_stream_is_refused(device, chain, D):
    """n_steps = 2^63 - 1 overflowed the CPU chains' batch of steps ((n_steps + 3) / 4 * 4) and read past their
    normals' buffer: the process died of SIGSEGV (session 53's sanitizer review). A row's stream holds n_steps x D
    normals; past 2^60 of them the call is refused by name (such a chain would never finish anyway)."""
    x = torch.zeros(2, D, device=device)
    run = ((lambda n: ebm.langevin_chain(x, "harmonic", n, 0.1)) if chain == "langevin"
           else (lambda n: ebm.hmc_chain(x, "harmonic", n, 0.1, 2)))
    for n_steps in (2 ** 63 - 1, 2 ** 60 // D + 1):
        with pytest.raises(ValueError, match=rf"n_steps must be at most 2\^60 / D = {2 ** 60 // D} .*got {n_steps}"):
            run(n_steps)
    out = run(3)  # langevin: the state; hmc: (state, acceptance rate)
    assert (out[0] if isinstance(out, tuple) else out).shape == (2, D)
