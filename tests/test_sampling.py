"""Family `sampling`: normal and cem_update against reference.py, statistics, bad input, compile, graphs."""
import math
import re

import pytest
import torch
from conftest import (DEVICES, TOLERANCES, check_dynamic_batch, min_cpu_seconds, needs_cuda, needs_graphs, needs_two_gpus,
                      on_two_gpus)
from hypothesis import given, settings
from hypothesis import strategies as st

import loader

fam = loader.load("sampling")
ref = fam.reference
ALL_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


# ---------------------------------------------------------------- normal: statistics

@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_normal_moments_and_independence(device, dtype):
    d, n = 6, 40000
    mean = torch.tensor([0.0, 1.0, -2.0, 5.0, 0.5, 3.0], device=device)
    std = torch.tensor([1.0, 2.0, 0.5, 0.1, 3.0, 0.0], device=device)
    x = fam.normal(mean, std, n, dtype=dtype)
    assert x.shape == (n, d) and x.dtype == dtype and x.device.type == device
    xf = x.double()
    # sample means within 5 standard errors (+ the output dtype's rounding)
    rounding = {torch.float16: 2e-3, torch.bfloat16: 2e-2}.get(dtype, 0.0) * (mean.abs().double() + 1)
    se = std.double() / math.sqrt(n)
    assert ((xf.mean(0) - mean.double()).abs() <= 5 * se + rounding).all(), xf.mean(0)
    # sample std within ~5 standard errors of the std (se ~ std / sqrt(2n))
    sd = xf.std(0)
    assert ((sd - std.double()).abs() <= 5 * std.double() / math.sqrt(2 * n) + rounding).all(), sd
    assert (x[:, 5].double() == 3.0).all()  # std 0 gives the mean exactly
    # off-diagonal correlation ~ 0: the blog kernel's shared normal per sample gives 1 here
    corr = torch.corrcoef(xf[:, :5].T.cpu())
    off = corr - torch.eye(5, dtype=corr.dtype)
    assert off.abs().max() < 5 / math.sqrt(n), corr
    # consecutive rows and columns are independent draws (lag-1 correlation along the flat order)
    z = ((xf[:, :5] - mean[:5].double()) / std[:5].double()).flatten().cpu()
    lag = torch.corrcoef(torch.stack([z[:-1], z[1:]]))[0, 1]
    assert lag.abs() < 5 / math.sqrt(z.numel())


def test_normal_tails_look_gaussian(device):
    z = fam.normal(torch.zeros(4, device=device), torch.ones(4, device=device), 50000).flatten().double().cpu()
    # fraction beyond 1, 2, 3 sigma against the exact values
    for k, p in [(1, 0.3173105), (2, 0.0455003), (3, 0.0026998)]:
        frac = (z.abs() > k).double().mean().item()
        assert abs(frac - p) < 6 * math.sqrt(p * (1 - p) / z.numel()) + 1e-4, (k, frac)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_normal_pairs_are_uniform_on_the_circle(device, dtype):
    # Box-Muller pairs (elements 2k, 2k+1): the angle is uniform (16-bit outputs: its 16 bits must
    # cover the whole turn), r^2 is Exp(1/2) and independent of the angle, whatever the output width
    z = fam.normal(torch.zeros(8, device=device), torch.ones(8, device=device), 100000, dtype=dtype)
    pairs = z.double().cpu().view(-1, 2)
    angle = torch.atan2(pairs[:, 1], pairs[:, 0])
    counts = torch.histc(angle, 64, -math.pi, math.pi)
    expected = pairs.shape[0] / 64
    chi2 = ((counts - expected) ** 2 / expected).sum().item()
    assert chi2 < 120, chi2  # 63 degrees of freedom: mean 63, sd ~11
    r2 = (pairs ** 2).sum(1)
    for t in (1.0, 4.0, 9.0):
        p = math.exp(-t / 2)
        frac = (r2 > t).double().mean().item()
        assert abs(frac - p) < 6 * math.sqrt(p * (1 - p) / r2.numel()) + 2e-3, (t, frac)
    # radius and angle come from disjoint bits: r^2 has mean 2 (sd 2) in every eighth of the turn
    octant = ((angle + math.pi) / (2 * math.pi) * 8).long().clamp(0, 7)
    for k in range(8):
        part = r2[octant == k]
        assert abs(part.mean().item() - 2) < 5 * 2 / math.sqrt(part.numel()) + 0.01, (k, part.mean().item())
    if dtype != torch.float32:
        assert z.float().abs().max() <= 4.87  # 16-bit uniforms: |z| <= sqrt(2 ln 2^17) = 4.86


def test_normal_16bit_and_32bit_draws_share_philox_calls(device):
    # Call c of a 16-bit output (8 normals) and of a 32-bit one (4 normals) read the same four Philox
    # words: the radius of 16-bit pair 0 comes from the top 16 bits of word x, that of 32-bit pair 0
    # from its top 23 bits (u = 1 - top23 / 2^23). Recover top16 from the float32 pair and predict the
    # bfloat16 pair's radius: this checks the CUDA kernel's own Philox (round keys kept in registers)
    # against jk::philox4x32_10, which the 32-bit path uses.
    mean, std, n = torch.zeros(8, device=device), torch.ones(8, device=device), 4096
    torch.manual_seed(11)
    wide = fam.normal(mean, std, n, dtype=torch.float32).double().cpu().flatten().view(-1, 4)
    torch.manual_seed(11)
    narrow = fam.normal(mean, std, n, dtype=torch.bfloat16).double().cpu().flatten().view(-1, 8)
    calls = narrow.shape[0]
    r2_wide = (wide[:calls, 0:2] ** 2).sum(1)
    scaled = -torch.expm1(-r2_wide / 2) * 65536  # (1 - u) 2^16 = top23 / 2^7
    top16 = scaled.floor()
    clear = (scaled - top16 - 0.5).abs() < 0.4  # far from a step: top16 is certain
    predicted = torch.sqrt(-2 * torch.log((top16 + 0.5) / 65536))
    got = (narrow[:, 0:2] ** 2).sum(1).sqrt()
    ok = (got - predicted).abs() <= 0.01 * predicted + 0.02
    assert clear.sum() > calls * 0.7
    assert ok[clear].all(), (got[clear][~ok[clear]][:5], predicted[clear][~ok[clear]][:5])


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_cuda_normal_16bit_tails_and_misaligned_out(dtype):
    # 8 outputs per thread step: totals that end inside a step, and an out that is not 16-byte aligned,
    # take the scalar path; std = 0 gives the mean rounded once, std > 0 finite draws
    for n, d in ((333, 7), (1, 3), (5, 1), (1000, 9)):
        mean = torch.randn(d, device="cuda")
        buf = torch.full((n * d + 1,), float("nan"), dtype=dtype, device="cuda")
        view = buf[1:].view(n, d)
        fam.normal(mean, torch.zeros(d, device="cuda"), n, out=view)
        assert torch.equal(view, mean.to(dtype).expand(n, d)) and torch.isnan(buf[0].float())
        x = fam.normal(mean, torch.ones(d, device="cuda"), n, dtype=dtype)
        assert torch.isfinite(x.float()).all()
        if n * d >= 8:
            assert not torch.equal(x.flatten()[:4], x.flatten()[4:8])


def test_normal_sizes(device):
    one = fam.normal(torch.tensor([2.0], device=device), torch.tensor([0.0], device=device), 1)
    assert one.shape == (1, 1) and one.item() == 2.0
    empty = fam.normal(torch.zeros(3, device=device), torch.ones(3, device=device), 0)
    assert empty.shape == (0, 3)
    n = (1 << 20) + 3  # n > 10^6 with d = 1, and an odd total (tail chunk)
    big = fam.normal(torch.tensor([1.0], device=device), torch.tensor([2.0], device=device), n)
    assert big.shape == (n, 1)
    assert abs(big.mean().item() - 1.0) < 5 * 2 / math.sqrt(n)
    assert abs(big.std().item() - 2.0) < 5 * 2 / math.sqrt(2 * n)
    # d not a multiple of the vector width, so chunks cross rows
    odd = fam.normal(torch.arange(7.0, device=device), torch.full((7,), 1e-3, device=device), 333)
    assert (odd - torch.arange(7.0, device=device)).abs().max() < 1e-2


def test_normal_narrow_rows_cost_about_what_wide_rows_cost():
    # The CPU kernel scaled each row as a run of its own: per value, d = 1 took 3.4x the CPU time of d = 1024
    # (2x eager torch.randn's), d = 2 1.8x (session 45's CPU review). The draws depend on the flat index alone.
    n = 1 << 20
    gen = torch.Generator()

    def draw(mean, std, rows):
        return fam.normal(mean, std, rows, generator=gen.manual_seed(3))

    narrow = min_cpu_seconds(lambda: draw(torch.zeros(1), torch.ones(1), n))
    wide = min_cpu_seconds(lambda: draw(torch.zeros(1024), torch.ones(1024), n // 1024))
    assert narrow < 1.8 * wide, f"d = 1: {narrow * 1e3:.1f} ms, d = 1024: {wide * 1e3:.1f} ms for {n} values"
    z = draw(torch.zeros(1024), torch.ones(1024), 3).flatten()
    mean, std = torch.tensor([1.0, -2.0, 3.0]), torch.tensor([0.5, 1.0, 2.0])
    torch.testing.assert_close(draw(mean, std, 1024), mean + std * z.view(1024, 3))


def test_normal_reproducible(device):
    mean, std = torch.zeros(5, device=device), torch.ones(5, device=device)
    torch.manual_seed(123)
    a = fam.normal(mean, std, 100)
    b = fam.normal(mean, std, 100)
    torch.manual_seed(123)
    c = fam.normal(mean, std, 100)
    assert torch.equal(a, c)
    assert not torch.equal(a, b)  # consecutive calls never reuse draws
    g = torch.Generator(device=device).manual_seed(7)
    d1 = fam.normal(mean, std, 10, generator=g)
    g.manual_seed(7)
    assert torch.equal(d1, fam.normal(mean, std, 10, generator=g))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_normal_out_variant(device, dtype):
    mean, std = torch.tensor([1.0, -1.0, 2.0], device=device), torch.tensor([0.5, 1.0, 0.0], device=device)
    out = torch.full((2000, 3), float("nan"), dtype=dtype, device=device)
    res = fam.normal(mean, std, 2000, out=out)
    assert res is out and torch.isfinite(out.float()).all()
    assert (out[:, 2].float() == 2.0).all()
    torch.manual_seed(5)
    a = fam.normal(mean, std, 2000, dtype=dtype)
    torch.manual_seed(5)
    fam.normal(mean, std, 2000, out=out)
    assert torch.equal(a, out)
    # a misaligned (offset) out still gets every element
    buf = torch.full((2000 * 3 + 1,), float("nan"), dtype=dtype, device=device)
    view = buf[1:].view(2000, 3)
    fam.normal(mean, std, 2000, out=view)
    assert torch.isfinite(view.float()).all() and torch.isnan(buf[0].float())


def test_normal_bad_input(device):
    m, s = torch.zeros(3, device=device), torch.ones(3, device=device)
    with pytest.raises((RuntimeError, ValueError), match="std"):
        fam.normal(m, torch.ones(4, device=device), 5)
    with pytest.raises((RuntimeError, ValueError), match="mean"):
        fam.normal(torch.zeros(3, 2, device=device), torch.ones(3, 2, device=device), 5)
    with pytest.raises((RuntimeError, ValueError), match="mean"):
        fam.normal(torch.zeros(3, dtype=torch.int64, device=device), s.long(), 5)
    with pytest.raises((RuntimeError, ValueError), match="std"):
        fam.normal(m, s.double(), 5)
    with pytest.raises((RuntimeError, ValueError), match="n must"):
        fam.normal(m, s, -1)
    with pytest.raises((RuntimeError, ValueError), match="dtype"):
        fam.normal(m, s, 5, dtype=torch.int32)
    with pytest.raises((RuntimeError, ValueError), match="out"):
        fam.normal(m, s, 5, out=torch.empty(5, 4, device=device))
    with pytest.raises((RuntimeError, ValueError), match="out"):
        fam.normal(m, s, 5, out=torch.empty(3, 5, device=device).T)


def test_normal_out_rejects_bad_out(device):
    m, s = torch.zeros(3, device=device), torch.ones(3, device=device)
    for bad in (torch.empty(1, 3, device=device).expand(5, 3),  # overlapping rows
                torch.empty(5, 3, dtype=torch.int32, device=device),
                torch.empty(5, 3, dtype=torch.complex64, device=device),
                torch.empty(5, 3, device="meta")):
        with pytest.raises((RuntimeError, ValueError), match="out"):
            fam.ops.normal_out(m, s, out=bad)
    # mean or std inside out: the first rows written would change the parameters the later rows read
    out = torch.ones(6, 3, device=device)
    with pytest.raises(ValueError, match="out shares memory with mean"):
        fam.normal(out[0], s, 6, out=out)
    with pytest.raises(ValueError, match="out shares memory with std"):
        fam.normal(m, out[5], 6, out=out)


def test_meta_shapes():
    m = torch.empty(7, device="meta")
    assert fam.normal(m, m, 5, dtype=torch.bfloat16).shape == (5, 7)
    x, sc = torch.empty(20, 7, device="meta"), torch.empty(20, device="meta")
    new_mean, new_std = fam.cem_update(x, sc, 3, m, m)
    assert new_mean.shape == (7,) and new_std.shape == (7,) and new_mean.device.type == "meta"
    with pytest.raises((RuntimeError, ValueError), match="n_elite"):
        fam.cem_update(x, sc, 21, m, m)


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_normal_negative_std(device, bad):
    """A NaN std passed the CPU's check (as NaN < 0 is false) and gave a column of NaN; torch.normal
    refuses it."""
    m, s = torch.zeros(3, device=device), torch.tensor([1.0, bad, 1.0], device=device)
    if device == "cpu":
        with pytest.raises(ValueError, match=r"std\[1\] = (-1|nan)"):
            fam.normal(m, s, 5)
    else:  # no host sync on CUDA: the bad column is NaN, the others are fine
        x = fam.normal(m, s, 5)
        assert torch.isnan(x[:, 1]).all() and torch.isfinite(x[:, [0, 2]]).all()


def test_normal_opcheck(device):
    m = torch.randn(5, device=device)
    # std = 0 makes the op deterministic, so every opcheck test (aot dispatch compares runs) applies
    torch.library.opcheck(fam.ops.normal.default, (m, torch.zeros(5, device=device), 7))
    torch.library.opcheck(fam.ops.normal.default, (m, torch.ones(5, device=device), 7), {"dtype": torch.bfloat16},
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))
    out = torch.empty(7, 5, device=device)
    torch.library.opcheck(fam.ops.normal_out.default, (m, torch.zeros(5, device=device)), {"out": out})


# ---------------------------------------------------------------- cem_update

def _check_cem(device, n, d, n_elite, dtype=torch.float32, score_dtype=None, smoothing=0.0, min_std=0.0,
               maximize=False, scores=None):
    samples = (torch.randn(n, d, dtype=torch.float64, device=device) * 2 + 1).to(dtype)
    if scores is None:
        scores = torch.randn(n, dtype=torch.float64, device=device).to(score_dtype or dtype)
    mean = torch.randn(d, device=device).to(dtype)
    std = torch.rand(d, device=device).to(dtype)
    got = fam.cem_update(samples, scores, n_elite, mean, std, smoothing, min_std, maximize)
    want = ref.cem_update(samples, scores, n_elite, mean, std, smoothing, min_std, maximize)
    atol, rtol = TOLERANCES[dtype]
    atol, rtol = max(atol, 1e-9), max(rtol, 1e-9)
    if dtype == torch.float32:
        atol, rtol = 2e-5, 2e-5  # different summation orders over n_elite terms
    for g, w, name in zip(got, want, ("mean", "std")):
        assert g.dtype == dtype and g.shape == (d,)
        torch.testing.assert_close(g, w, atol=atol, rtol=rtol, msg=lambda m: f"{name}: {m}")
    return got


@pytest.mark.parametrize("n,d,n_elite", [(100, 7, 10), (1000, 33, 1), (257, 5, 257), (3000, 65, 300)])
@pytest.mark.parametrize("maximize", [False, True])
def test_cem_update_matches_reference(device, n, d, n_elite, maximize):
    _check_cem(device, n, d, n_elite, maximize=maximize)


@pytest.mark.parametrize("dtype,score_dtype", [(torch.float64, torch.float64), (torch.float32, torch.float64),
                                               (torch.bfloat16, torch.float32), (torch.float16, torch.bfloat16),
                                               (torch.float64, torch.float16)])
def test_cem_update_dtypes(device, dtype, score_dtype):
    _check_cem(device, 500, 9, 37, dtype=dtype, score_dtype=score_dtype, smoothing=0.25, min_std=0.05)


def test_cem_update_smoothing_and_floor(device):
    _check_cem(device, 400, 40, 40, smoothing=0.7, min_std=0.9)
    _check_cem(device, 400, 40, 40, smoothing=1.0)


@pytest.mark.parametrize("maximize", [False, True])
def test_cem_update_ties(device, maximize):
    # few distinct values: the threshold value is shared by many rows; lower indices must win
    for n_elite in (1, 17, 150, 299, 300):
        scores = torch.randint(0, 4, (300,), device=device).float()
        _check_cem(device, 300, 6, n_elite, scores=scores, maximize=maximize)
    scores = torch.zeros(300, device=device)
    scores[::2] = -0.0  # -0.0 == +0.0 ties too
    _check_cem(device, 300, 6, 100, scores=scores, maximize=maximize)


@pytest.mark.parametrize("maximize", [False, True])
def test_cem_update_nan_and_inf_scores(device, maximize):
    scores = torch.randn(200, device=device)
    scores[::3] = float("nan")
    scores[1] = float("inf")
    scores[5] = -float("inf")
    _check_cem(device, 200, 4, 120, scores=scores, maximize=maximize)  # some NaN rows are needed: last, by index
    _check_cem(device, 200, 4, 50, scores=scores, maximize=maximize)


def test_cem_update_many_chunks(device):
    # enough rows for many row chunks and several radix blocks; d spans several column tiles
    _check_cem(device, 70001, 70, 7000)
    scores = torch.randint(0, 50, (70001,), device=device).float()
    _check_cem(device, 70001, 3, 7000, scores=scores)


def test_cem_update_selects_the_elite(device):
    # the elite rows are exactly known: the mean is their mean
    n, d = 1000, 3
    samples = torch.randn(n, d, device=device)
    scores = torch.arange(n, device=device).flip(0).float()  # the last rows are best
    m, s = fam.cem_update(samples, scores, 10, torch.zeros(d, device=device), torch.ones(d, device=device))
    torch.testing.assert_close(m, samples[-10:].mean(0))
    torch.testing.assert_close(s, samples[-10:].std(0, correction=0))


def test_cem_update_bad_input(device):
    n, d = 20, 3
    x, sc = torch.randn(n, d, device=device), torch.randn(n, device=device)
    m, s = torch.zeros(d, device=device), torch.ones(d, device=device)
    cases = [
        ((x, sc, 0, m, s), "n_elite"),
        ((x, sc, n + 1, m, s), "n_elite"),
        ((x, sc[:-1], 5, m, s), "scores"),
        ((x[0], sc, 5, m, s), "samples"),
        ((x, sc, 5, torch.zeros(d + 1, device=device), s), "mean"),
        ((x, sc, 5, m, torch.ones(d + 1, device=device)), "std"),
        ((x, sc, 5, m.double(), s.double()), "mean"),
        ((x, sc.long(), 5, m, s), "scores"),
    ]
    for args, name in cases:
        with pytest.raises((RuntimeError, ValueError), match=name):
            fam.cem_update(*args)
    with pytest.raises((RuntimeError, ValueError), match="smoothing"):
        fam.cem_update(x, sc, 5, m, s, smoothing=1.5)
    with pytest.raises((RuntimeError, ValueError), match="min_std"):
        fam.cem_update(x, sc, 5, m, s, min_std=-1.0)
    for bad in (float("nan"), float("inf")):
        with pytest.raises((RuntimeError, ValueError), match="smoothing"):
            fam.cem_update(x, sc, 5, m, s, smoothing=bad)
        with pytest.raises((RuntimeError, ValueError), match="min_std"):
            fam.cem_update(x, sc, 5, m, s, min_std=bad)
    with pytest.raises((RuntimeError, ValueError), match="samples"):
        fam.cem_update(x.to(torch.complex64), sc, 5, m, s)
    with pytest.raises((RuntimeError, ValueError), match="scores"):
        fam.cem_update(x, sc.bool(), 5, m, s)
    if device == "cpu":
        with pytest.raises((RuntimeError, ValueError), match="std"):
            fam.cem_update(x, sc, 5, m, -s)


def test_cem_update_opcheck(device):
    x, sc = torch.randn(50, 4, device=device), torch.randn(50, device=device)
    torch.library.opcheck(fam.ops.cem_update.default, (x, sc, 7, torch.zeros(4, device=device),
                                                       torch.ones(4, device=device), 0.5, 0.1, True))


# ---------------------------------------------------------------- property-based: random shapes, strides, dtypes

def _view(t, strided):
    """t itself, or a non-contiguous view with t's values (every other element of a larger tensor)."""
    if not strided:
        return t
    big = torch.empty(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
    big[..., ::2] = t
    return big[..., ::2]


@pytest.mark.parametrize("device_name", DEVICES)
@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 300), d=st.integers(1, 70), elite_frac=st.floats(0.0, 1.0),
       dtype=st.sampled_from(ALL_DTYPES), score_dtype=st.sampled_from(ALL_DTYPES), strided=st.booleans(),
       ties=st.booleans(), maximize=st.booleans(), smoothing=st.sampled_from([0.0, 0.3]),
       seed=st.integers(0, 2**31 - 1))
def test_cem_update_property(device_name, n, d, elite_frac, dtype, score_dtype, strided, ties, maximize,
                             smoothing, seed):
    g = torch.Generator().manual_seed(seed)
    n_elite = max(1, min(n, round(elite_frac * n)))
    samples = (torch.randn(n, d, generator=g, dtype=torch.float64) * 2 + 1).to(dtype)
    scores = (torch.randint(0, 5, (n,), generator=g) if ties else torch.randn(n, generator=g, dtype=torch.float64))
    scores = scores.to(score_dtype)
    mean, std = torch.randn(d, generator=g).to(dtype), torch.rand(d, generator=g).to(dtype)
    args = [_view(t.to(device_name), strided) for t in (samples, scores, mean, std)]
    got = fam.cem_update(args[0], args[1], n_elite, args[2], args[3], smoothing, 0.01, maximize)
    want = ref.cem_update(samples, scores, n_elite, mean, std, smoothing, 0.01, maximize)
    atol, rtol = TOLERANCES[dtype]
    atol, rtol = (2e-5, 2e-5) if dtype == torch.float32 else (max(atol, 1e-9), max(rtol, 1e-9))
    for g_, w in zip(got, want):
        assert g_.shape == (d,) and g_.dtype == dtype and g_.device.type == device_name
        torch.testing.assert_close(g_.cpu(), w, atol=atol, rtol=rtol)


@pytest.mark.parametrize("device_name", DEVICES)
@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 200), d=st.integers(0, 40), dtype=st.sampled_from(ALL_DTYPES),
       out_dtype=st.sampled_from([None] + ALL_DTYPES), strided=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_normal_property(device_name, n, d, dtype, out_dtype, strided, seed):
    g = torch.Generator().manual_seed(seed)
    mean = (torch.randn(d, generator=g) * 3).to(dtype)
    zero = torch.zeros(d, dtype=dtype)
    # std = 0: every element is its column's mean, exactly as the reference computes it
    got = fam.normal(_view(mean.to(device_name), strided), _view(zero.to(device_name), strided), n, dtype=out_dtype)
    want = ref.normal(mean, zero, n, dtype=out_dtype)
    assert got.shape == (n, d) and got.dtype == want.dtype and got.device.type == device_name
    torch.testing.assert_close(got.cpu(), want, atol=0, rtol=0)
    # std > 0: finite draws that differ between rows
    std = _view(torch.rand(d, generator=g).to(dtype).add(0.5).to(device_name), strided)
    x = fam.normal(_view(mean.to(device_name), strided), std, n, dtype=out_dtype)
    assert x.shape == (n, d) and torch.isfinite(x.float()).all()
    if n >= 2 and d >= 1:
        assert not torch.equal(x[0], x[1])


# ---------------------------------------------------------------- the loop, compile, graphs

def test_cem_minimize_sphere(device):
    torch.manual_seed(0)
    d = 8

    def sphere(x):
        return ((x - 3.0) ** 2).sum(-1)

    res = fam.cem_minimize(sphere, torch.zeros(d, device=device), torch.full((d,), 2.0, device=device),
                           n_samples=400, n_elite=40, n_iters=25)
    assert res.history.shape == (25,)
    assert (res.mean - 3.0).abs().max() < 0.05, res.mean
    assert res.best_value.item() == pytest.approx(sphere(res.best_x).item())
    assert res.history[-1] < res.history[0]
    # maximize the negation: same optimum
    res2 = fam.cem_minimize(lambda x: -sphere(x), torch.zeros(d, device=device),
                            torch.full((d,), 2.0, device=device), 400, 40, 25, maximize=True)
    assert (res2.mean - 3.0).abs().max() < 0.05


def test_torch_compile_fullgraph():
    def step(mean, std, samples):
        fresh = fam.normal(mean, torch.zeros_like(std), samples.shape[0])  # std 0: deterministic
        scores = ((samples + fresh) ** 2).sum(-1)
        return fam.cem_update(samples, scores, 5, mean, std, 0.1, 0.01)

    mean, std, samples = torch.randn(4), torch.rand(4), torch.randn(50, 4)
    compiled = torch.compile(step, fullgraph=True)
    for got, want in zip(compiled(mean, std, samples), step(mean, std, samples)):
        torch.testing.assert_close(got, want)


# The batch users vary: the number of samples n (normal, normal_out: the rows of a batch x to perturb
# or of the out buffer) and the population's rows (cem_update). n is a SymInt, so one graph serves all n.
def test_normal_dynamic_batch_compiles_once_and_exports(device):
    m, s = torch.randn(3, device=device), torch.rand(3, device=device)
    check_dynamic_batch(lambda mean, std, x: x + fam.normal(mean, std, x.shape[0]),
                        lambda n: (m, s, torch.randn(n, 3, device=device)))


def test_normal_out_dynamic_batch_compiles_once_and_exports(device):
    m, s = torch.randn(3, device=device), torch.rand(3, device=device)
    # clone: the compiled and the eager call write the same buffer, so compare what each wrote
    check_dynamic_batch(lambda mean, std, out: fam.normal(mean, std, out.shape[0], out=out).clone(),
                        lambda n: (m, s, torch.empty(n, 3, device=device)))


def test_cem_update_dynamic_batch_compiles_once_and_exports(device):
    m, s = torch.randn(3, device=device), torch.rand(3, device=device)
    # n_elite = 2 <= n: the op's check guards n >= 2, which export's Dim(min=2) meets
    check_dynamic_batch(lambda x, scores: fam.cem_update(x, scores, 2, m, s, 0.1, 0.01),
                        lambda n: (torch.randn(n, 3, device=device), torch.randn(n, device=device)))


def test_data_dependent_sizes_compile(device):
    """A population filtered by a mask (samples[feasible]) or a count read from a tensor has a data-dependent
    (unbacked) size under torch.compile, as torch.randn and torch.topk accept. The ops' shape rules compared it
    with a bound (n >= 0, n >= n_elite) as a guard, which torch.compile(fullgraph=True) cannot take: "Could not
    guard on data-dependent expression". They check it when the op runs instead (a runtime assertion)."""
    import torch._dynamo.config as dynamo_config

    x = torch.randn(10, 3, device=device)
    keep = torch.tensor([1, 0, 1, 1, 0, 1, 1, 0, 1, 1], dtype=torch.bool, device=device)
    m, s = torch.randn(3, device=device), torch.rand(3, device=device) + 0.1

    def refit(x, keep):
        rows = x[keep]
        return fam.cem_update(rows, rows.square().sum(1), 2, m, s, 0.1, 0.01)

    def draw(m, s, keep):
        return fam.normal(m, s, int(keep.sum()))

    with dynamo_config.patch(capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True):
        for f, args in ((refit, (x, keep)), (draw, (m, s, keep))):
            torch._dynamo.reset()
            torch.manual_seed(0)
            got = torch.compile(f, fullgraph=True)(*args)
            torch.manual_seed(0)
            torch.testing.assert_close(got, f(*args))


@needs_graphs
@needs_cuda
def test_cuda_graph_capture():
    mean, std = torch.zeros(16, device="cuda"), torch.ones(16, device="cuda")
    out = torch.empty(256, 16, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up outside the graph
        fam.normal(mean, std, 256, out=out)
        fam.cem_minimize(lambda x: (x ** 2).sum(-1), mean, std, 256, 26, 3)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fam.normal(mean, std, 256, out=out)
        res = fam.cem_minimize(lambda x: ((x - 1) ** 2).sum(-1), mean, std, 256, 26, 20)
    graph.replay()
    first = out.clone()
    graph.replay()
    torch.cuda.synchronize()
    assert not torch.equal(first, out)  # every replay draws fresh numbers
    assert (res.mean - 1).abs().max() < 0.1
    assert abs(out.mean().item()) < 0.1 and abs(out.std().item() - 1) < 0.1


# ---------------------------------------------------------------- cem_minimize(cuda_graph=True)

def _cem_run(device, n_iters=12, fn=None, dtype=torch.float32, **options):
    """A small CEM run with its own generator."""
    def objective(x):
        return ((x - 0.5) ** 2).sum(-1) + x[:, 0].sin()

    generator = torch.Generator(device=device).manual_seed(5)
    mean = torch.linspace(-1, 1, 12, device=device, dtype=dtype)
    return fam.cem_minimize(fn or objective, mean, 0.8, 300, 30, n_iters, smoothing=0.2, min_std=1e-3,
                            generator=generator, **options)


def _assert_same_result(got, want):
    """Every field of two CEMResults equal, bit for bit."""
    for name, g, w in zip(fam.CEMResult._fields, got, want):
        assert torch.equal(g, w), name


def _nan_first_population(target=0.5):
    """A sphere around `target` whose first population scores all NaN (the best so far must then move off NaN)."""
    calls = []

    def fn(x):
        calls.append(1)
        value = ((x.float() - target) ** 2).sum(-1)
        return torch.full_like(value, float("nan")) if len(calls) == 1 else value
    return fn


@needs_graphs
@pytest.mark.parametrize("maximize", [False, True])
@pytest.mark.parametrize("n_iters", [1, 2, 12])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_cem_minimize_with_cuda_graph_gives_the_same_numbers(device, maximize, n_iters, dtype, monkeypatch):
    """cuda_graph replays one captured refit: the same numbers, bit for bit (on the CPU it has no effect). On CUDA
    cem_update runs twice whatever n_iters (iteration 0 and the capture): the replays do run, the loop did not
    quietly run eagerly."""
    want = _cem_run(device, n_iters, maximize=maximize, dtype=dtype)
    calls = []
    cem_update = fam.module.cem_update
    monkeypatch.setattr(fam.module, "cem_update", lambda *args: calls.append(1) or cem_update(*args))
    got = _cem_run(device, n_iters, maximize=maximize, dtype=dtype, cuda_graph=True)
    _assert_same_result(got, want)
    assert len(calls) == (min(n_iters, 2) if device == "cuda" else n_iters)


@needs_graphs
@needs_cuda
def test_cem_minimize_with_cuda_graph_moves_off_a_first_population_scored_nan():
    want = _cem_run("cuda", 5, _nan_first_population())
    got = _cem_run("cuda", 5, _nan_first_population(), cuda_graph=True)
    assert torch.isfinite(got.best_value) and got.best_value == got.history[1:].min()
    for name, g, w in zip(fam.CEMResult._fields, got, want):
        assert torch.equal(g.nan_to_num(), w.nan_to_num()), name


@needs_graphs
@needs_cuda
def test_cem_minimize_with_cuda_graph_advances_the_default_generator_as_the_loop_does():
    def run(cuda_graph):
        torch.manual_seed(11)
        result = fam.cem_minimize(lambda x: (x * x).sum(-1), torch.zeros(5, device="cuda"), 1.0, 64, 8, 6,
                                  cuda_graph=cuda_graph)
        return result, torch.randn(4, device="cuda")  # the draws after the loop: the generator's offset

    (want, after_want), (got, after_got) = run(False), run(True)
    _assert_same_result(got, want)
    assert torch.equal(after_got, after_want)


@needs_graphs
@needs_cuda
def test_cem_minimize_with_cuda_graph_takes_a_fn_that_syncs_with_the_host():
    """fn runs outside the graph, so a host sync in it is fine. (A capture of fn that failed on a sync had left
    torch's default generator and allocator in capture mode for the rest of the process: torch 2.11.)"""
    def syncing(x):
        value = ((x - 0.5) ** 2).sum(-1) + x[:, 0].sin()
        return value * 2 if value.max().item() > 1e30 else value  # .item(): a host sync

    want = _cem_run("cuda", 4, syncing)
    got = _cem_run("cuda", 4, syncing, cuda_graph=True)
    _assert_same_result(got, want)


@needs_graphs
@needs_cuda
def test_cem_minimize_with_cuda_graph_keeps_the_graph_of_a_call_whose_fn_raised():
    """A raise from fn between replays leaves replays queued that use the shared memory pool: the next call's
    must wait for them, so the failed call's graph and its event become the ones kept (they were not: the next
    call waited only for the call before it)."""
    def fails_on_third_call():
        calls = []

        def fn(x):
            calls.append(1)
            if len(calls) == 3:
                raise ValueError("objective failed")
            return ((x - 0.5) ** 2).sum(-1)
        return fn

    _cem_run("cuda", 4, cuda_graph=True)
    kept = fam.module._graph_reuse[torch.cuda.current_device()]
    with pytest.raises(ValueError, match="objective failed"):
        _cem_run("cuda", 6, fails_on_third_call(), cuda_graph=True)
    now = fam.module._graph_reuse[torch.cuda.current_device()]
    assert now[1] is not kept[1] and now[2] is not kept[2]
    got, want = _cem_run("cuda", 5, cuda_graph=True), _cem_run("cuda", 5)  # and the next call is still right
    _assert_same_result(got, want)


def _cem_run_with_another_thread_during_the_capture(monkeypatch, target):
    """_cem_run("cuda", 6, cuda_graph=True) with target run in another thread inside the capture (cem_update's second
    call), and the same run without the graph or the thread."""
    import threading

    calls, cem_update = [], fam.module.cem_update

    def cem_update_meanwhile(*args):
        calls.append(1)
        if len(calls) == 2:  # inside the capture
            assert torch.cuda.is_current_stream_capturing()
            thread = threading.Thread(target=target)
            thread.start()
            thread.join()
        return cem_update(*args)

    want = _cem_run("cuda", 6)
    monkeypatch.setattr(fam.module, "cem_update", cem_update_meanwhile)
    return _cem_run("cuda", 6, cuda_graph=True), want


@needs_graphs
@needs_cuda
def test_cem_minimize_with_cuda_graph_lets_other_threads_allocate_during_its_capture(monkeypatch):
    """Another thread allocates device memory during the capture (a data loader, say), a size the cache lacks, so a
    cudaMalloc. The capture restricts only its own thread (thread_local mode): in the default mode ("global") such a
    call in any thread counts as unsafe during a capture. (A synchronize in another thread invalidates the capture in
    either mode: session 51, call 6.)"""
    errors = []

    def other_thread_allocates():
        try:
            torch.empty(3 * 2**30 + 4321 * 2**21, dtype=torch.uint8, device="cuda")  # no cached block this size
        except RuntimeError as error:
            errors.append(error)

    got, want = _cem_run_with_another_thread_during_the_capture(monkeypatch, other_thread_allocates)
    assert errors == []
    _assert_same_result(got, want)


@needs_graphs
@needs_cuda
def test_cem_minimize_with_cuda_graph_lets_other_threads_draw_from_their_own_generator_during_its_capture(monkeypatch):
    """The workaround the docstring gives: on torch 2.11 a capture marks the default CUDA generator as capturing, so
    another thread's draw from it during the capture raises (session 52, call 6: 251 of 2584 draws during 50 calls).
    A draw from a generator of the thread's own, made during the capture, is the same as that generator's outside."""
    drawn = []

    def other_thread_draws():
        generator = torch.Generator(device="cuda").manual_seed(7)
        try:
            drawn.append(torch.randn(1000, device="cuda", generator=generator))
        except RuntimeError as error:
            drawn.append(error)

    got, want = _cem_run_with_another_thread_during_the_capture(monkeypatch, other_thread_draws)
    _assert_same_result(got, want)
    assert len(drawn) == 1 and isinstance(drawn[0], torch.Tensor), drawn
    outside = torch.randn(1000, device="cuda", generator=torch.Generator(device="cuda").manual_seed(7))
    torch.testing.assert_close(drawn[0], outside, rtol=0, atol=0)


@needs_graphs
@needs_cuda
def test_cem_minimize_with_cuda_graph_warns_when_its_capture_fails_and_runs_without_it():
    """A synchronize in another thread during the capture invalidates it (in any capture mode). The call raised a
    bare "operation failed due to a previous error during capture" from inside cem_update, and torch 2.11 left its
    CUDA generator in capture mode (every later draw in the process raised "Offset increment outside graph capture")
    and the shared memory pool recording the failed capture (the next capture into it raised "already recording").
    Now the call warns and finishes without the graph, with the numbers of cuda_graph=False, and later draws and
    captures work. In a subprocess, as a failure to undo torch's state would spoil this process."""
    import os, subprocess, sys, textwrap
    code = textwrap.dedent("""
        import threading, warnings
        import torch
        import loader
        fam = loader.load("sampling")
        cem_update, sync_in_the_capture = fam.module.cem_update, []

        def cem_update_meanwhile(*args):
            if sync_in_the_capture and torch.cuda.is_current_stream_capturing():
                sync_in_the_capture.clear()
                thread = threading.Thread(target=torch.cuda.synchronize)
                thread.start()
                thread.join()
            return cem_update(*args)

        def run(cuda_graph):
            torch.manual_seed(0)
            return fam.cem_minimize(lambda x: (x * x).sum(-1), torch.zeros(4, device="cuda"), 1.0, 64, 8, 4,
                                    cuda_graph=cuda_graph)

        def same(a, b):
            return all(torch.equal(x, y) for x, y in zip(a, b))

        fam.module.cem_update = cem_update_meanwhile
        run(True)  # a graph whose memory pool the failing capture shares
        for _ in range(2):  # twice: the first failure's undoing must leave the next capture free to fail and undo too
            sync_in_the_capture.append(1)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                fallen_back = run(True)
            print("warned:", " | ".join(str(w.message) for w in caught if w.category is RuntimeWarning))
            plain = run(False)
            print("without the graph, the same numbers:", same(fallen_back, plain))
            print("draws:", torch.randn(1000, device="cuda").std().item())
            print("graphed again, the same numbers:", same(run(True), plain))
        """)
    out = subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(os.path.dirname(__file__)),
                         capture_output=True, text=True, timeout=600)
    said = out.stdout[-2000:] + out.stderr[-2000:]
    assert out.returncode == 0, said
    warned = [line for line in out.stdout.splitlines() if line.startswith("warned:")]
    assert len(warned) == 2, said
    for line in warned:
        assert "could not capture its refit as a CUDA graph" in line and "runs without it" in line, said
        assert "synchronize in another thread" in line, said
    assert out.stdout.count("without the graph, the same numbers: True") == 2, said
    draws = [float(part.split()[0]) for part in out.stdout.split("draws: ")[1:]]
    assert len(draws) == 2 and all(0.9 < d < 1.1 for d in draws), said
    assert out.stdout.count("graphed again, the same numbers: True") == 2, said


@needs_graphs
@needs_cuda
def test_cem_minimize_with_cuda_graph_reuses_its_memory_from_call_to_call():
    """Each capture shares the previous one's memory pool. A pool per call stays reserved until an out-of-memory
    retry or empty_cache, so a planner calling cem_minimize every step would grow by the captured refit's
    temporaries (here ~16 MB: the 2^20 scores as float64 keys, twice) at every call."""
    def run():
        fam.cem_minimize(lambda x: (x * x).sum(-1), torch.zeros(4, device="cuda"), 1.0, 2**20, 64, 3, cuda_graph=True)

    for _ in range(2):
        run()
    torch.cuda.synchronize()
    before = torch.cuda.memory_reserved()
    for _ in range(5):
        run()
    torch.cuda.synchronize()
    assert torch.cuda.memory_reserved() - before < 16 * 2**20


@needs_graphs
@needs_cuda
def test_cem_minimize_with_cuda_graph_inside_a_caller_s_capture_runs_as_plain_ops():
    mean = torch.zeros(8, device="cuda")
    fam.cem_minimize(lambda x: ((x - 1) ** 2).sum(-1), mean, 1.0, 256, 26, 2)  # warm up
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        result = fam.cem_minimize(lambda x: ((x - 1) ** 2).sum(-1), mean, 1.0, 256, 26, 20, cuda_graph=True)
    graph.replay()
    torch.cuda.synchronize()
    assert (result.mean - 1).abs().max() < 0.1
    assert torch.isfinite(result.history).all()


@needs_cuda
def test_cuda_matches_cpu_reference_large():
    # the benchmark's shape, smaller d: checks many radix blocks and stats tiles on the GPU
    samples = torch.randn(65536, 100, device="cuda")
    scores = torch.randn(65536, device="cuda")
    got = fam.cem_update(samples, scores, 6554, samples[0], samples[1].abs())
    want = ref.cem_update(samples, scores, 6554, samples[0], samples[1].abs())
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("device_name", DEVICES)
def test_benchmark_cases_construct(device_name):
    import importlib

    module = importlib.import_module("benchmarks.cases_sampling")
    cases = module.cases(device_name, small=True)
    assert cases
    for case in cases:
        case.ours(*case.args)
        if case.reference is not None:
            case.reference(*case.args)


@needs_cuda
@pytest.mark.parametrize("score_dtype", [torch.float32, torch.float64])
def test_cuda_cem_update_many_list_tiles(score_dtype):
    # > 1024 * 2048 rows: each elite-list block walks several row tiles; float64 scores take 6 select
    # passes; integer scores put many ties at the threshold, ranked across tiles and blocks
    n, d = 2_300_001, 3
    samples = torch.randn(n, d, device="cuda")
    for scores in (torch.randn(n, device="cuda"), torch.randint(0, 7, (n,), device="cuda").float()):
        scores = scores.to(score_dtype)
        for n_elite, maximize in ((230_000, False), (1_000_003, True), (n, False)):
            got = fam.cem_update(samples, scores, n_elite, samples[0], samples[1].abs(), 0.0, 0.0, maximize)
            want = ref.cem_update(samples, scores, n_elite, samples[0], samples[1].abs(), 0.0, 0.0, maximize)
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, atol=2e-5, rtol=2e-5)


@needs_cuda
def test_cuda_cem_update_is_deterministic():
    samples = torch.randn(65536, 300, device="cuda")
    scores = torch.randint(0, 1000, (65536,), device="cuda").float()
    mean, std = torch.zeros(300, device="cuda"), torch.ones(300, device="cuda")
    first = fam.cem_update(samples, scores, 6554, mean, std, 0.1, 0.01)
    for _ in range(3):
        again = fam.cem_update(samples, scores, 6554, mean, std, 0.1, 0.01)
        assert all(torch.equal(a, b) for a, b in zip(first, again))


@needs_cuda
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_cuda_normal_draws_do_not_depend_on_d_or_alignment(dtype):
    """Element i of the flattened (n, d) output takes lane i % kPer of Philox call i / kPer whatever d is, so
    with every column's mean and std known, normal(mean, std, n) is mean + std * z for z the draws of
    normal(0, 1, n * d) with d = 1 (both right after the same seed). The kernel's stride is a multiple of d's
    period (d / gcd(d, kPer) calls) and each thread keeps its columns' mean and std in registers: large
    prime d make a period longer than one wave of resident threads (stride = the period, or a multiple), and
    an out 2 or 4 bytes past 16-byte alignment takes the element-wise path. A column or counter mix-up moves
    elements by O(1)."""
    eps = torch.finfo(dtype).eps
    step = torch.finfo(dtype).smallest_normal * eps  # the spacing of subnormals: a rounding near 0 is absolute
    for d, n in [(3, 50_001), (16, 9_999), (1_000, 301), (100_003, 12), (400_009, 3)]:
        col = torch.arange(d, device="cuda")
        mean = ((col % 7) - 3).float()
        std = 0.5 + 0.25 * (col % 5).float()
        torch.manual_seed(21)
        z = fam.normal(torch.zeros(1, device="cuda"), torch.ones(1, device="cuda"), n * d, dtype=dtype)
        want = mean.double() + std.double() * z.double().view(n, d)
        # the draw itself and the result are each rounded once to the dtype (16-bit outputs: z too; float16's
        # subnormals, seen on an H200: -6.56e-7 for -5.96e-7, one step apart)
        bound = 2 * eps * (mean.double().abs() + 2 * std.double() * z.double().view(n, d).abs()) + 2 * step + 1e-12
        torch.manual_seed(21)
        aligned = fam.normal(mean, std, n, dtype=dtype)
        buf = torch.full((n * d + 1,), float("nan"), dtype=dtype, device="cuda")
        misaligned = buf[1:].view(n, d)
        torch.manual_seed(21)
        fam.normal(mean, std, n, out=misaligned)
        for name, got in (("aligned", aligned), ("misaligned out", misaligned)):
            error = (got.double() - want).abs()
            worst = (error - bound).flatten().argmax().item()
            assert (error <= bound).all(), (f"d={d} n={n} {name}: element {worst} (row {worst // d}, column "
                                            f"{worst % d}) is {got.flatten()[worst].item()}, want "
                                            f"{want.flatten()[worst].item()}")


@needs_cuda
@needs_two_gpus
def test_cuda_second_device_while_current_is_0():
    # tensors on cuda:1, the current device 0, cuda:1's current stream a side stream (conftest.on_two_gpus):
    # the draws come from cuda:1's generators (default and given), the kernels run on cuda:1's stream
    d = 37
    mean, std = torch.randn(d), torch.rand(d) + 0.1
    for dtype in (torch.float32, torch.bfloat16):
        want, got = on_two_gpus(lambda m, s: fam.normal(m, s, 5000, dtype=dtype), mean, std)
        assert torch.equal(got, want)
        want, got = on_two_gpus(
            lambda m, s: fam.normal(m, s, 5000, dtype=dtype, generator=torch.Generator(m.device).manual_seed(4)),
            mean, std)
        assert torch.equal(got, want)
        def into_misaligned(m, s, buf):
            fam.normal(m, s, 5000, out=buf[1:].view(5000, d))
            return buf

        want, got = on_two_gpus(into_misaligned, mean, std, torch.zeros(5000 * d + 1, dtype=dtype))
        assert torch.equal(got, want)
    samples, scores = torch.randn(70_000, 50), torch.randn(70_000)
    for score_dtype in (torch.float32, torch.float64):
        want, got = on_two_gpus(lambda x, sc, m, s: fam.cem_update(x, sc, 7001, m, s, 0.1, 0.01),
                                samples, scores.to(score_dtype), samples[0], samples[1].abs())
        for g, w in zip(got, want):
            assert torch.equal(g, w)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_cem_update_an_infinite_first_elite_value_gives_an_infinite_mean(device, dtype):
    """CUDA sums x - x0 per range of elite rows, x0 the range's first value: an x0 of +-inf made every term
    NaN (inf - inf), so that column's mean came out NaN where the CPU and the reference give +-inf. Fails
    before the fix on CUDA only (needs a GPU to show it)."""
    n, d = 64, 3
    samples = torch.randn(n, d, dtype=torch.float64).to(dtype)
    samples[0, 0], samples[0, 1] = float("inf"), -float("inf")  # row 0 is the first elite row
    samples[5, 2] = float("inf")  # later in its range: +inf with or without the fix
    scores = torch.arange(n, dtype=torch.float32)  # ascending: the elite are rows 0 .. n_elite - 1
    mean, std = torch.zeros(d, dtype=dtype), torch.ones(d, dtype=dtype)
    atol, rtol = (2e-5, 2e-5) if dtype == torch.float32 else TOLERANCES[dtype]
    for n_elite in (1, 10, n):  # n: several elite ranges on CUDA, the first holding row 0
        got = fam.cem_update(samples.to(device), scores.to(device), n_elite, mean.to(device), std.to(device))
        want = ref.cem_update(samples, scores, n_elite, mean, std)
        assert got[0][0].item() == float("inf") and got[0][1].item() == -float("inf"), (n_elite, got[0])
        assert got[1][:2].isnan().all(), (n_elite, got[1])  # inf - mean: the std is NaN, as on the CPU
        for g, w, name in zip(got, want, ("mean", "std")):
            torch.testing.assert_close(g.cpu(), w, atol=atol, rtol=rtol, equal_nan=True,
                                       msg=lambda m: f"n_elite={n_elite} {name}: {m}")


# ---------------------------------------------------------------- session 40's review

def test_cem_minimize_recovers_from_a_first_population_scored_nan():
    """A NaN best loses to any number (NaN ranks last): it had stuck for the whole run."""
    result = fam.cem_minimize(_nan_first_population(1.0), torch.zeros(2), torch.ones(2), 20, 5, 5, generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(result.best_value)
    assert result.best_value == result.history[1:].min()
    torch.testing.assert_close(((result.best_x - 1) ** 2).sum(), result.best_value)


@pytest.mark.parametrize("score_dtype", [torch.float64, torch.float16])
def test_cem_minimize_history_has_the_scores_dtype(score_dtype):
    """As best_value and distributed_cem_minimize's history (it was float32 whatever the scores)."""
    result = fam.cem_minimize(lambda x: (x.double() ** 2).sum(-1).to(score_dtype), torch.zeros(2), torch.ones(2),
                              20, 5, 3, generator=torch.Generator().manual_seed(1))
    assert result.history.dtype == result.best_value.dtype == score_dtype
    assert result.best_value == result.history.min()


@pytest.mark.parametrize("n_samples, n_elite, name", [(0, 1, "n_samples"), (4, 5, "n_elite"), (4, 0, "n_elite")])
def test_cem_minimize_checks_the_population_before_calling_fn(n_samples, n_elite, name):
    def fn(x):
        raise AssertionError("fn was called")

    with pytest.raises(ValueError, match=name):
        fam.cem_minimize(fn, torch.zeros(2), torch.ones(2), n_samples, n_elite, 3)


@pytest.mark.parametrize("counts, name", [((8.0, 2, 2), "n_samples"), ((8, 2.0, 2), "n_elite"),
                                          ((8, 2, 2.5), "n_iters"), ((8, True, 2), "n_elite")])
def test_cem_minimize_refuses_counts_that_are_not_ints_before_calling_fn(counts, name):
    """n_samples=8.0 and n_iters=2.5 raised torch.empty's "argument 'size' must be tuple of ints", n_elite=2.0 the
    op's schema error, the last two after a whole fn call (session 52's review); a bool is 1 to Python."""
    def fn(x):
        raise AssertionError("fn was called")

    with pytest.raises(TypeError, match=f"^{name} must be an int"):
        fam.cem_minimize(fn, torch.zeros(2), torch.ones(2), *counts)


def test_cem_minimize_returns_values_when_fn_s_scores_require_grad():
    """A learned objective called without no_grad: best_value and history required grad and chained every
    iteration's graph (its saved activations) into the result, and a backward through them raised on the reused
    samples buffer (session 52's review). distributed_cem_minimize already returned values."""
    W = torch.randn(3, 16, requires_grad=True)
    result = fam.cem_minimize(lambda x: torch.tanh(x @ W).sum(-1), torch.zeros(3), 1.0, 32, 4, 3)
    for name, value in zip(result._fields, result):
        assert not value.requires_grad and value.grad_fn is None, name


def test_normal_out_with_a_0_dim_mean_names_it():
    with pytest.raises((ValueError, RuntimeError), match="out|mean"):
        fam.normal(torch.tensor(0.0), torch.tensor(1.0), 2, out=torch.empty(3))
    with pytest.raises((ValueError, RuntimeError), match=r"\bmean\b"):
        fam.normal(torch.tensor(0.0), torch.tensor(1.0), 2, out=torch.empty(2, 1))


def test_normal_out_takes_strided_parameters_beside_it_in_one_buffer():
    """torch cannot tell whether a strided view overlaps out (TooHard): the parameter is copied, not refused
    (a real overlap is still an error)."""
    buffer = torch.zeros(20)
    buffer[0:6:2] = torch.tensor([1.0, -2.0, 3.0])
    out = buffer[10:16].view(2, 3)
    fam.normal(buffer[0:6:2], torch.ones(3), 2, out=out, generator=torch.Generator().manual_seed(5))
    expected = fam.normal(torch.tensor([1.0, -2.0, 3.0]), torch.ones(3), 2, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    with pytest.raises(ValueError, match="shares memory with mean"):
        fam.normal(buffer[10:13], torch.ones(3), 2, out=out)


# ---------------------------------------------------------------- a new user's walkthrough

@pytest.mark.parametrize("fn, error, given", [
    (lambda x: x ** 2, ValueError, r"got shape \[16, 3\]"),          # per-coordinate, not per-sample (was an IndexError)
    (lambda x: (x ** 2).sum(-1, keepdim=True), ValueError, r"got shape \[16, 1\]"),
    (lambda x: (x ** 2).sum(-1).tolist(), TypeError, "got list"),     # was "'list' object has no attribute 'dtype'"
])
def test_cem_minimize_names_fn_when_its_scores_are_not_one_per_sample(fn, error, given):
    with pytest.raises(error, match=r"fn must return .*\(n_samples,\) = \(16,\).*" + given):
        fam.cem_minimize(fn, torch.zeros(3), torch.ones(3), 16, 4, 2)


def test_cem_minimize_names_mean_given_as_a_list():
    with pytest.raises(TypeError, match="mean must be a tensor .* got list"):  # was "'list' object has no attribute 'shape'"
        fam.cem_minimize(lambda x: (x ** 2).sum(-1), [0.0, 0.0], torch.ones(2), 16, 4, 2)


def test_cem_minimize_takes_a_number_std_for_every_dimension():
    """std=0.5 raised the schema error of normal_out, an op the user never called; a number is every dimension's
    std, the same run as torch.full_like(mean, 0.5); a negative one is refused by name."""
    fn, mean = (lambda x: ((x - 0.3) ** 2).sum(-1)), torch.zeros(3)
    torch.manual_seed(0)
    given = fam.cem_minimize(fn, mean, 0.5, 64, 8, 3)
    torch.manual_seed(0)
    expected = fam.cem_minimize(fn, mean, torch.full_like(mean, 0.5), 64, 8, 3)
    for a, b in zip(given, expected):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    with pytest.raises(ValueError, match="std"):
        fam.cem_minimize(fn, mean, -1.0, 64, 8, 3)


def test_cem_result_pickles_into_another_process(tmp_path):
    """A CEMResult saved with torch.save (or pickled) loaded in a new process raised ModuleNotFoundError ("No module
    named '_jk_ops_jk_sampling_<key>'", the build's private module) until session 45, and so would after any edit
    of the family's files; deepcopy and pickle within the process keep the class."""
    import copy, os, pickle, subprocess, sys, textwrap
    torch.manual_seed(0)
    result = fam.cem_minimize(lambda x: ((x - 0.3) ** 2).sum(-1), torch.zeros(3), 0.5, 32, 4, 2)
    for twin in (copy.deepcopy(result), pickle.loads(pickle.dumps(result))):
        assert type(twin) is type(result) and all(torch.equal(a, b) for a, b in zip(twin, result))
    path = tmp_path / "result.pt"
    torch.save(result, path)
    code = textwrap.dedent(f"""
        import torch
        result = torch.load({str(path)!r}, weights_only=False)
        print(type(result).__name__, result.best_value.item().hex())
        """)
    out = subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(os.path.dirname(__file__)),
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["CEMResult", result.best_value.item().hex()]


# ---------------------------------------------------------------- the sampling/fused review

@pytest.mark.parametrize("shape", [(), (2, 3)])
def test_cem_minimize_names_mean_that_is_not_1_dim(shape):
    """A 0-d mean raised "IndexError: tuple index out of range" (its length sized the samples buffer)."""
    with pytest.raises(ValueError, match=r"mean must have shape \(d,\), got shape " + re.escape(str(list(shape)))):
        fam.cem_minimize(lambda x: (x ** 2).sum(-1), torch.zeros(shape), torch.ones(shape), 16, 4, 2)


def test_cem_minimize_takes_a_mean_and_std_that_require_grad(device):
    """A planner's mean from a network (or an nn.Parameter) requires grad: cem_minimize raised from normal_out,
    an op the user never called ("normal_out writes in place ... 'mean' requires grad"). CEM draws and refits
    without gradients, so it runs on the values: the same result as on detached copies."""
    mean = torch.nn.Parameter(torch.zeros(3, device=device))
    std = torch.ones(3, device=device).requires_grad_()

    def fn(x):
        return ((x - 1) ** 2).sum(-1)

    got = fam.cem_minimize(fn, mean, std, 50, 10, 4, generator=torch.Generator(device=device).manual_seed(0))
    want = fam.cem_minimize(fn, mean.detach(), std.detach(), 50, 10, 4,
                            generator=torch.Generator(device=device).manual_seed(0))
    for name, g, w in zip(got._fields, got, want):
        assert not g.requires_grad, name
        assert torch.equal(g, w), name


@pytest.mark.parametrize("options, name", [(dict(smoothing=1.5), "smoothing"), (dict(smoothing=float("nan")), "smoothing"),
                                           (dict(min_std=-0.1), "min_std"), (dict(min_std=float("inf")), "min_std")])
def test_cem_minimize_checks_smoothing_and_min_std_before_calling_fn(options, name):
    """They were checked by cem_update, after a whole (possibly long) fn call, as n_elite was before session 40."""
    def fn(x):
        raise AssertionError("fn was called")

    with pytest.raises(ValueError, match=name):
        fam.cem_minimize(fn, torch.zeros(2), torch.ones(2), 8, 2, 3, **options)


def test_cem_minimize_under_compile_names_a_bad_smoothing():
    """Under torch.compile(fullgraph=True) the op's own check names it (a Python raise became "Observed exception")."""
    compiled = torch.compile(lambda m, s, smoothing: fam.cem_minimize(lambda x: (x ** 2).sum(-1), m, s, 8, 2, 2,
                                                                      smoothing=smoothing), fullgraph=True)
    with pytest.raises(Exception, match="smoothing must be in"):
        compiled(torch.zeros(2), torch.ones(2), 1.5)


# ---------------------------------------------------------------- session 43's review

_F32_MAX, _F16_MAX = torch.finfo(torch.float32).max, torch.finfo(torch.float16).max


@pytest.mark.parametrize("maximize", [False, True])
@pytest.mark.parametrize("scores", [
    [math.inf, _F32_MAX, math.inf, _F32_MAX],        # +inf ranked as the largest finite score (tied, row 0 won)
    [-_F32_MAX, -math.inf, -_F32_MAX, -math.inf],    # -inf ranked as the smallest finite score
    [_F32_MAX, math.inf, -math.inf, -_F32_MAX],      # (maximize: the same ties, the other way round)
    [math.nan, math.inf, math.nan, -math.inf],       # NaN ranks after +inf, whatever the direction
    [math.nan, math.inf, math.nan, math.inf],
    [math.inf, _F16_MAX, math.nan, -_F16_MAX, -math.inf],  # float16's largest finite score is within reach
    [math.nan, math.nan, math.nan],                   # no score: row 0, as the sort
    [3.0, 1.0, 2.0, 1.0, 3.0, 1.0],                   # ties go to the lower row, either direction
])
@pytest.mark.parametrize("score_dtype", [torch.float32, torch.float16, torch.float64])
def test_cem_minimize_best_is_cem_update_s_pick_with_infinite_scores(scores, maximize, score_dtype):
    """The best sample cem_minimize reports is the one cem_update ranks first (n_elite=1: its mean): torch.nan_to_num
    had turned +-inf into +-finfo.max, so an infinite score tied with the largest finite one, the first row won,
    and best_x / best_value / history named a worse row than the one the refit took."""
    values = torch.tensor(scores, dtype=score_dtype)
    result = fam.cem_minimize(lambda x: values, torch.zeros(3), torch.ones(3), len(scores), 1, 1, maximize=maximize,
                              generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(result.best_x, result.mean, rtol=0, atol=0)
    key = -values.double() if maximize else values.double()
    want = values[torch.sort(key, stable=True).indices[0]]
    torch.testing.assert_close(result.best_value, want, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(result.history, want[None], rtol=0, atol=0, equal_nan=True)


def test_cpu_normal_draws_do_not_depend_on_the_batch_of_philox_calls():
    """The CPU computes Philox eight calls at a time in AVX2 (where the build has it) and the rest one at a
    time: the first 7 calls' draws (28 normals, all from the one-at-a-time loop) equal those of longer draws
    whose calls go eight at a time (with and without a tail of single calls). Each CPU call takes a fresh
    seed from the generator, its counters starting at 0."""
    zero, one = torch.zeros(1), torch.ones(1)
    draws = {}
    for n in (28, 4096, 4096 + 20):
        torch.manual_seed(5)
        draws[n] = fam.normal(zero, one, n)
    assert torch.equal(draws[28], draws[4096][:28])
    assert torch.equal(draws[4096], draws[4096 + 20][:4096])
    torch.manual_seed(6)
    assert not torch.equal(fam.normal(zero, one, 28), draws[28])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_normal_16bit_draws_are_never_exactly_zero(device, dtype):
    """A 16-bit output's angle had 2^16 grid points, four of them quarter turns, where cos or sin is
    exactly 0: 1 in 2^15 outputs was exactly 0 (64 expected here; a true normal rounded to 16 bits gives
    none). The grid is now turned off the quarter turns."""
    torch.manual_seed(3)
    x = fam.normal(torch.zeros(8, device=device), torch.ones(8, device=device), 1 << 18, dtype=dtype)
    assert (x == 0).sum().item() == 0
    z = x.double().flatten()
    assert abs(z.mean().item()) < 5 / math.sqrt(z.numel()) and abs(z.var().item() - 1) < 5 * math.sqrt(2 / z.numel())


# ---------------------------------------------------------------- session 46's API review

@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.complex64])
def test_cem_minimize_names_fn_when_its_scores_are_not_floating_point(dtype):
    """An objective that counts (constraint violations, collisions) returns integer scores, which cem_update
    refuses: the message named `scores`, an argument the caller of cem_minimize never passed. It now names fn,
    as for scores of the wrong shape."""
    with pytest.raises(TypeError, match=r"fn must return floating-point scores .*got " + str(dtype).split(".")[1]):
        fam.cem_minimize(lambda x: (x ** 2).sum(-1).to(dtype), torch.zeros(3), torch.ones(3), 16, 4, 2)


# ---------------------------------------------------------------- session 46's mutation review

def test_cem_minimize_history_is_each_population_s_best_not_the_running_best():
    """history holds each iteration's own best score (CEMResult's comment), not the best seen so far: a
    mutant that wrote best_value into history passed every test (history.min() is the same either way)."""
    seen = []
    values = iter([torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([5.0, 6.0, 7.0, 8.0]),
                   torch.tensor([0.5, 9.0, 9.0, 9.0])])

    def fn(x):
        s = next(values)
        seen.append(s.min())
        return s

    result = fam.cem_minimize(fn, torch.zeros(2), torch.ones(2), 4, 2, 3, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(result.history, torch.stack(seen), rtol=0, atol=0)
    assert result.best_value == 0.5


@pytest.mark.parametrize("options", [dict(smoothing=1.0), dict(smoothing=0.0, min_std=0.0)])
def test_cem_minimize_takes_the_boundary_settings(options):
    """n_elite = n_samples (refit on the whole population) and smoothing = 1 (keep the mean and std) are in range
    for cem_update; the early checks must not refuse them (mutants that did passed every test)."""
    mean, std = torch.tensor([0.5, -1.0]), torch.tensor([1.0, 2.0])
    result = fam.cem_minimize(lambda x: (x ** 2).sum(-1), mean, std, 6, 6, 2, **options,
                              generator=torch.Generator().manual_seed(0))
    if options["smoothing"] == 1.0:
        torch.testing.assert_close(result.mean, mean, rtol=0, atol=0)
        torch.testing.assert_close(result.std, std, rtol=0, atol=0)
    assert torch.isfinite(result.mean).all() and torch.isfinite(result.std).all()


def test_normal_out_with_the_wrong_row_count_names_n():
    """out of shape (m, d) with m != n: the op itself checks only d, so without the Python check n was ignored
    and m rows came back in silence (a mutant that dropped it passed every test)."""
    m, s = torch.zeros(3), torch.ones(3)
    for rows in (3, 7):
        with pytest.raises(ValueError, match=r"out must have shape \(n, d\) = \(5, 3\)"):
            fam.normal(m, s, 5, out=torch.empty(rows, 3))


# ---------------------------------------------------------------- session 47's API review

@pytest.mark.parametrize("number_for", ["mean", "std"])
def test_normal_takes_a_number_mean_or_std_for_every_dimension(number_for):
    """torch.normal takes a Python number for mean or std; normal(mean, 1.0, n) raised the schema's error of the
    internal op (session 46's API review). A number is every dimension's, as cem_minimize(std=1.0) reads it."""
    m, s = torch.tensor([0.5, -1.0, 2.0]), torch.tensor([1.0, 1.0, 1.0])
    args = (m, 1.0) if number_for == "std" else (0.5, s)
    tensors = (m, s) if number_for == "std" else (torch.full((3,), 0.5), s)
    got = fam.normal(*args, 50, generator=torch.Generator().manual_seed(1))
    want = fam.normal(*tensors, 50, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    out = torch.empty(50, 3, dtype=torch.float64)
    fam.normal(*args, 50, out=out, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(out, fam.normal(*tensors, 50, dtype=torch.float64,
                                               generator=torch.Generator().manual_seed(1)), rtol=0, atol=0)


def test_normal_refuses_a_number_its_tensor_s_dtype_cannot_hold_by_name():
    """A number takes the other parameter's dtype: 1e5 beside a float16 mean raised torch's "value cannot be
    converted to type c10::Half without overflow", naming neither (session 52's review)."""
    with pytest.raises(ValueError, match="^std=100000.0 does not fit float16"):
        fam.normal(torch.zeros(2, dtype=torch.float16), 1e5, 3, dtype=torch.float32)
    with pytest.raises(ValueError, match="^mean=1e\\+39 does not fit float32"):
        fam.normal(1e39, torch.ones(2), 3)


def test_normal_two_numbers_take_their_width_from_out_or_are_refused_by_name():
    """Two numbers (or a number beside a 0-d tensor) leave d unknown: refused by name, not by the schema; with out
    (as torch.normal(0.5, 2.0, size, out=out)) its rows give d."""
    with pytest.raises(TypeError, match=r"mean and std.*\(d,\) tensor"):
        fam.normal(0.0, 1.0, 5)
    with pytest.raises(ValueError, match=r"mean must be 1-D"):
        fam.normal(torch.tensor(0.0), 1.0, 5)
    out = fam.normal(0.5, 2.0, 5, out=torch.empty(5, 3, dtype=torch.float64), generator=torch.Generator().manual_seed(2))
    want = fam.normal(torch.full((3,), 0.5, dtype=torch.float64), torch.full((3,), 2.0, dtype=torch.float64), 5,
                      generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(out, want, rtol=0, atol=0)


def test_cem_minimize_with_scores_on_another_device_names_fn():
    """An fn that returns its scores on another device than the samples (CPU scores for CUDA samples; here meta
    scores for CPU samples, the same path) raised cem_update's "scores is on ... but samples is on ...", an
    argument the caller never passed (session 46's API review)."""
    with pytest.raises(ValueError, match=r"fn must return scores on the samples' device cpu, got scores on meta"):
        fam.cem_minimize(lambda x: (x ** 2).sum(-1).to("meta"), torch.zeros(3), 1.0, 8, 2, 2)


def test_an_exported_cem_minimize_saves_and_loads(tmp_path):
    """torch.export.export of a module returning cem_minimize's CEMResult worked, but torch.export.save raised
    "Can't serialize TreeSpec of namedtuple class ...CEMResult because we didn't register a serialized_type_name"
    (sessions 43-46's open list). The loaded program gives the eager result, as a CEMResult."""
    class Minimize(torch.nn.Module):
        def forward(self, mean):
            return fam.cem_minimize(lambda x: ((x - 1) ** 2).sum(-1), mean, 1.0, 32, 8, 3)

    mean = torch.zeros(3)
    program = torch.export.export(Minimize(), (mean,))
    torch.export.save(program, tmp_path / "cem.pt2")
    loaded = torch.export.load(tmp_path / "cem.pt2").module()
    torch.manual_seed(0)
    got = loaded(mean)
    torch.manual_seed(0)
    want = Minimize()(mean)
    assert type(got) is fam.CEMResult
    for name in fam.CEMResult._fields:
        torch.testing.assert_close(getattr(got, name), getattr(want, name), rtol=0, atol=0)
