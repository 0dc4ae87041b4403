"""Family `diffusion`: DDPM / DDIM steps and conv1d_gn_mish against reference.py (and diffusers when present)."""
import math
import os

import pytest
import torch
import torch.nn.functional as F

import loader
from conftest import (DEVICES, TOLERANCES, check_dynamic_batch, min_cpu_seconds, needs_cuda, needs_graphs, needs_two_gpus,
                      on_two_gpus, GRAPHS_WORK)

D = loader.load("diffusion")
R = D.reference

SCHEDULES = ["linear", "scaled_linear", "squaredcos_cap_v2"]
PREDICTIONS = ["epsilon", "v_prediction", "sample"]
STEP_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
BAD = (RuntimeError, ValueError)


def assert_close(actual, expected, dtype, scale=1.0):
    atol, rtol = TOLERANCES[dtype]
    torch.testing.assert_close(actual, expected, atol=atol * scale, rtol=rtol * scale)


def step_inputs(shape, dtype, device):
    m, x, z = (torch.randn(shape, dtype=torch.float64).to(dtype=dtype, device=device) for _ in range(3))
    return m, x, z


# ---------------------------------------------------------------- schedule

@pytest.mark.parametrize("kind", SCHEDULES)
@pytest.mark.parametrize("T", [1, 10, 1000])
def test_schedule_matches_reference(kind, T):
    ours = D.ddpm_schedule(T, kind)
    assert ours.shape == (T, len(D.module.SCHEDULE_COLUMNS)) and ours.dtype == torch.float64
    torch.testing.assert_close(ours, R.ddpm_schedule(T, kind), atol=1e-14, rtol=1e-12)
    assert torch.isfinite(ours).all()


def test_schedule_on_device(device):
    assert D.ddpm_schedule(10, device=device).device.type == device
    # Like torch's factory functions it follows the default device (it stayed on the CPU, and the first
    # step under torch.set_default_device("cuda") refused it).
    with torch.device(device):
        assert D.ddpm_schedule(10).device.type == device
    with torch.device("meta"):
        assert D.ddpm_schedule(10).device.type == "meta"


def test_python_int_timesteps_stay_on_the_host_under_a_default_device(device):
    """Python int t and t_prev are host scalars, range-checked with a ValueError (the docstring). Under
    torch.set_default_device("cuda") they became device tensors: t out of range gave NaN, t_prev > t was not
    refused, CPU tensors were refused ("t is on cuda:0") and a capture raised on the copy (session 52's review)."""
    sched = D.ddpm_schedule(10, device=device)
    sample = torch.randn(2, 3, device=device)
    model_output, noise = torch.randn(2, 3, device=device), torch.randn(2, 3, device=device)
    want = D.ddpm_step(model_output, 3, sample, sched, noise)
    with torch.device("meta"):  # any other default device
        torch.testing.assert_close(D.ddpm_step(model_output, 3, sample, sched, noise), want)
        with pytest.raises(ValueError, match="t must be in"):
            D.ddpm_step(model_output, 10, sample, sched)
        with pytest.raises(ValueError, match="t_prev"):
            D.ddim_step(model_output, 3, 7, sample, sched)


# ---------------------------------------------------------------- steps against the reference

@pytest.mark.parametrize("dtype", STEP_DTYPES)
@pytest.mark.parametrize("prediction", PREDICTIONS)
@pytest.mark.parametrize("kind", SCHEDULES)
def test_ddpm_step_matches_reference(device, kind, prediction, dtype):
    T = 100
    sched = D.ddpm_schedule(T, kind, device=device)
    for shape in [(4, 16, 3), (3, 5, 7)]:  # vectorized and scalar paths
        m, x, z = step_inputs(shape, dtype, device)
        for clip in (True, False):
            for t in [0, 1, T // 2, T - 1]:
                ours = D.ddpm_step(m, t, x, sched, z, prediction, clip, 1.0)
                assert_close(ours, R.ddpm_step(m, t, x, sched, z, prediction, clip, 1.0), dtype)
            # one timestep per row, on the device, including t = 0 (no noise) and T - 1
            tt = torch.tensor([0, T - 1, 7][: shape[0]] + [3] * (shape[0] - 3), device=device)
            ours = D.ddpm_step(m, tt, x, sched, z, prediction, clip, 2.5)
            assert_close(ours, R.ddpm_step(m, tt, x, sched, z, prediction, clip, 2.5), dtype)


@pytest.mark.parametrize("dtype", STEP_DTYPES)
@pytest.mark.parametrize("prediction", PREDICTIONS)
def test_ddim_step_matches_reference(device, prediction, dtype):
    T = 1000
    sched = D.ddpm_schedule(T, "scaled_linear", 0.00085, 0.012, device=device)
    m, x, z = step_inputs((4, 8, 6), dtype, device)
    for eta in (0.0, 0.7):
        for t, tp in [(999, 979), (500, 480), (20, 0), (20, -1), (0, -1)]:
            for alpha_one in (True, False):
                for clipped in (False, True):
                    args = (eta, z, prediction, True, 1.0, alpha_one, clipped)
                    assert_close(D.ddim_step(m, t, tp, x, sched, *args), R.ddim_step(m, t, tp, x, sched, *args), dtype)
    tt = torch.tensor([999, 500, 20, 0], device=device, dtype=torch.int32)
    tp = torch.tensor([979, 480, -1, -1], device=device, dtype=torch.int32)
    args = (0.5, z, prediction, False, 1.0, True, False)
    assert_close(D.ddim_step(m, tt, tp, x, sched, *args), R.ddim_step(m, tt, tp, x, sched, *args), dtype)


def test_steps_accept_strided_inputs(device):
    sched = D.ddpm_schedule(50, device=device)
    m, x, z = (torch.randn(6, 5, 4, device=device).transpose(0, 2) for _ in range(3))
    t = torch.arange(0, 8, device=device)[::2]  # strided per-row timesteps
    out = D.ddpm_step(m, t, x, sched, z)
    assert out.is_contiguous()
    assert_close(out, R.ddpm_step(m, t, x, sched, z), torch.float32)
    assert D.ddpm_step(m[:0], 3, x[:0], sched).shape == (0, 5, 6)


@pytest.mark.parametrize("prediction", ["epsilon", "v_prediction", "sample"])
def test_steps_follow_the_reference_on_infinite_inputs(device, prediction):
    """The kernels fold each step into coefficients, some of them 0 where the reference's formula has no
    such term; 0 * inf made NaN of inputs that the formula clips to finite numbers (found by an audit)."""
    sched = D.ddpm_schedule(50, device=device)
    inf = float("inf")
    m = torch.tensor([[inf, 0.5, -inf, 0.2]], device=device)
    x = torch.tensor([[0.3, inf, 0.3, -inf]], device=device)
    z = torch.zeros(1, 4, device=device)

    def check(got, expected):  # where the reference is NaN (its own inf - inf), ours may be +-inf
        defined = ~expected.isnan()
        torch.testing.assert_close(got[defined], expected[defined])

    for clip in (True, False):
        check(D.ddpm_step(m, 10, x, sched, z, prediction, clip), R.ddpm_step(m, 10, x, sched, z, prediction, clip))
        for clipped_output in (True, False):
            args = (m, 10, 5, x, sched, 0.0, None, prediction, clip, 1.0, True, clipped_output)
            check(D.ddim_step(*args), R.ddim_step(*args))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_epsilon_steps_where_one_over_sqrt_alphas_cumprod_overflows_float32(device, dtype):
    """At a timestep whose alphas_cumprod is below ~1e-77 (linear betas to 0.4 over 1000 steps, or the default
    betas over 20000), 1 / sqrt(alphas_cumprod) exceeds float32. The reference divides (x - s1m * m) / sa: an
    infinite x0 that clipping makes +-1; the kernels folded 1 / sa into the coefficients of x and of m,
    inf * x - inf * m: NaN for every element but where x and m had opposite signs (session 45's special-values
    review). Unclipped, the reference's own 0 * inf (a float32 coefficient that underflowed) is NaN too."""
    sched = D.ddpm_schedule(1000, "linear", 1e-4, 0.4, device=device)
    assert sched[-1, 1] < 1e-77
    m = torch.tensor([[0.5, -0.5, 2.0, 0.1]], device=device, dtype=dtype)
    x = torch.tensor([[1.0, -1.0, 1.5, 0.0]], device=device, dtype=dtype)
    z = torch.zeros_like(x)

    def check(got, expected, clip):
        if clip:
            assert not expected.isnan().any()
        assert torch.equal(got.isnan(), expected.isnan()), (got, expected)
        torch.testing.assert_close(got[~got.isnan()], expected[~expected.isnan()])

    for clip in (True, False):
        check(D.ddpm_step(m, 999, x, sched, z, "epsilon", clip), R.ddpm_step(m, 999, x, sched, z, "epsilon", clip), clip)
        for clipped_output in (True, False):
            args = (m, 999, 989, x, sched, 0.0, None, "epsilon", clip, 1.0, True, clipped_output)
            check(D.ddim_step(*args), R.ddim_step(*args), clip)


@pytest.mark.parametrize("prediction", ["epsilon", "v_prediction", "sample"])
def test_steps_propagate_nan_like_the_reference(device, prediction):
    """A NaN input stays NaN wherever the reference's formula uses it, even with a coefficient that comes
    out 0 (t = 0, or t_prev = -1), and leaves rows alone where the formula has no such term."""
    sched = D.ddpm_schedule(50, device=device)
    nan = float("nan")
    m = torch.tensor([[nan, 0.5, 0.1, 0.2]], device=device).expand(2, 4).clone()
    x = torch.tensor([[0.3, nan, 0.3, 0.1]], device=device).expand(2, 4).clone()
    z = torch.tensor([[0.1, 0.2, nan, 0.3]], device=device).expand(2, 4).clone()
    t, t_prev = torch.tensor([0, 10], device=device), torch.tensor([-1, 4], device=device)

    def check(got, expected):
        assert torch.equal(got.isnan(), expected.isnan()), (got, expected)
        torch.testing.assert_close(got[~got.isnan()], expected[~expected.isnan()])

    for clip in (True, False):
        check(D.ddpm_step(m, t, x, sched, z, prediction, clip), R.ddpm_step(m, t, x, sched, z, prediction, clip))
        for eta, clipped_output in ((0.0, False), (0.5, False), (0.5, True)):
            args = (m, t, t_prev, x, sched, eta, z, prediction, clip, 1.0, True, clipped_output)
            check(D.ddim_step(*args), R.ddim_step(*args))


def test_steps_take_an_empty_batch_with_per_row_timesteps(device):
    sched, empty = D.ddpm_schedule(50, device=device), torch.zeros(0, 4, device=device)
    no_rows = torch.zeros(0, dtype=torch.long, device=device)
    assert D.ddpm_step(empty, no_rows, empty, sched).shape == (0, 4)
    assert D.ddim_step(empty, no_rows, no_rows, empty, sched).shape == (0, 4)


# ---------------------------------------------------------------- in-kernel noise

def _noise_of(step, *args):
    """The z the op drew: (out - out without noise) / sigma."""
    return step(*args)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ddpm_noise_is_standard_normal(device, dtype):
    T, t = 100, 60
    sched = D.ddpm_schedule(T, device=device)
    m, x, _ = step_inputs((8, 16, 130), dtype, device)  # 16640 values per call
    base = D.ddpm_step(m, t, x, sched, torch.zeros_like(x))
    sigma = sched[t, 7].item()
    z1 = ((D.ddpm_step(m, t, x, sched) - base) / sigma).double().flatten()
    z2 = ((D.ddpm_step(m, t, x, sched) - base) / sigma).double().flatten()
    n = z1.numel()
    for z in (z1, z2):
        assert abs(z.mean().item()) < 5 / n ** 0.5
        assert abs(z.std().item() - 1) < 5 / (2 * n) ** 0.5
        assert abs((z ** 4).mean().item() - 3) < 0.25  # Gaussian tails, not uniform
        lanes = z[: n // 4 * 4].view(-1, 4)  # the four outputs of one Philox call are independent
        corr = torch.corrcoef(lanes.T)
        assert (corr - torch.eye(4, dtype=corr.dtype, device=corr.device)).abs().max() < 0.06
        assert abs(torch.corrcoef(torch.stack([z[:-1], z[1:]]))[0, 1].item()) < 0.05
    assert abs(torch.corrcoef(torch.stack([z1, z2]))[0, 1].item()) < 0.05  # fresh numbers per call
    torch.manual_seed(123)
    a = D.ddpm_step(m, t, x, sched)
    torch.manual_seed(123)
    assert torch.equal(a, D.ddpm_step(m, t, x, sched))  # reproducible from PyTorch's generator


@pytest.mark.parametrize("step", ["ddpm", "ddim"])
def test_steps_draw_from_a_given_generator(device, step):
    """generator= (as diffusers' step takes one): its draws, not the default generator's, which stays where
    it was; the same seed gives what torch.manual_seed of that seed gives; a generator of another device
    is refused."""
    sched = D.ddpm_schedule(100, device=device)
    m, x, _ = step_inputs((4, 3, 50), torch.float32, device)

    def call(generator):
        if step == "ddpm":
            return D.ddpm_step(m, 40, x, sched, generator=generator)
        return D.ddim_step(m, 40, 20, x, sched, eta=1.0, generator=generator)

    torch.manual_seed(0)
    a = call(torch.Generator(device).manual_seed(5))
    default_next = torch.randn(8, device=device)
    torch.manual_seed(0)
    assert torch.equal(call(torch.Generator(device).manual_seed(5)), a)
    assert torch.equal(torch.randn(8, device=device), default_next)  # the default generator did not move
    assert not torch.equal(call(torch.Generator(device).manual_seed(6)), a)
    torch.manual_seed(5)
    assert torch.equal(call(None), a)
    if device == "cuda":
        with pytest.raises(RuntimeError, match="generator"):
            call(torch.Generator("cpu"))
    torch.library.opcheck(D.ops.ddpm_step, (m, torch.tensor(40), x, sched),
                          {"generator": torch.Generator(device).manual_seed(3)}, test_utils=("test_schema", "test_faketensor"))


def test_a_schedule_in_descending_order_is_refused_or_nan(device):
    """A table indexed by diffusers' descending `timesteps` steps the wrong way (alphas_cumprod rises from row
    t - 1 to row t): a CPU table raises by name, a GPU one gives those rows NaN; row 0 (no previous row) and
    a table in ascending order are untouched."""
    ascending = D.ddpm_schedule(50)
    descending = ascending.flip(0)
    m, x, z = step_inputs((2, 3, 8), torch.float32, device)
    t, t_prev = torch.tensor([0, 7], device=device), torch.tensor([-1, 3], device=device)
    steps = {"ddpm": lambda table, t: D.ddpm_step(m, t, x, table.to(device), z),
             "ddim": lambda table, t: D.ddim_step(m, t, t_prev, x, table.to(device), 0.5, z)}
    for name, step in steps.items():
        assert step(ascending, t).isfinite().all(), name
        if device == "cpu":
            with pytest.raises(ValueError, match=r"rows in ascending timestep order.*to row 7 in row 1;"):
                step(descending, t)
            with pytest.raises(ValueError, match="ascending timestep order"):
                step(descending, 7)
        else:
            out = step(descending, t)
            assert out[0].isfinite().all() and out[1].isnan().all(), name
    assert D.ddpm_step(m, 0, x, descending.to(device), z).isfinite().all()  # row 0 steps to alpha_prod_prev = 1


def test_noise_does_not_depend_on_the_code_path(device):
    """Element i always gets the same normal: 16-byte and scalar (misaligned) paths agree."""
    sched = D.ddpm_schedule(100, device=device)
    m, x = (torch.randn(4 * 64 + 1, device=device)[1:].view(4, 64) for _ in range(2))  # 4 bytes off alignment
    torch.manual_seed(7)
    misaligned = D.ddpm_step(m, 40, x, sched)
    torch.manual_seed(7)
    aligned = D.ddpm_step(m.clone(), 40, x.clone(), sched)
    assert_close(misaligned, aligned, torch.float32)


@needs_cuda
@pytest.mark.parametrize("shape", [(4096, 1, 4), (1000, 3, 1), (3, 7, 4000), (2, 4, 1028), (300, 16, 2048),
                                   (1200, 16, 2048)])
def test_step_noise_and_rows_on_cuda(shape):
    """Per-row timesteps: rows from 3 to 32768 elements (a block meets many rows or part of one); the
    unrolled loop has tails, and 1200x16x2048 needs more tiles than the grid has blocks (grid-stride).
    The noise of element i is the same whatever the block layout: per-row t (all equal) draws exactly
    what a scalar t draws."""
    sched = D.ddpm_schedule(100, device="cuda")
    m, x, z = step_inputs(shape, torch.float32, "cuda")
    t = torch.randint(1, 100, (shape[0],), device="cuda")
    assert_close(D.ddpm_step(m, t, x, sched, z), R.ddpm_step(m, t, x, sched, z), torch.float32)
    tp = (t - 7).clamp(min=-1)
    for eta in (0.0, 0.5):
        assert_close(D.ddim_step(m, t, tp, x, sched, eta, z), R.ddim_step(m, t, tp, x, sched, eta, z), torch.float32)
    same = torch.full((shape[0],), 40, device="cuda")
    torch.manual_seed(3)
    per_row = D.ddpm_step(m, same, x, sched)
    torch.manual_seed(3)
    assert torch.equal(per_row, D.ddpm_step(m, 40, x, sched))
    zero = torch.zeros_like(x)
    drawn = (per_row - D.ddpm_step(m, same, x, sched, zero)) / sched[40, 7]
    assert abs(drawn.mean().item()) < 5 / drawn.numel() ** 0.5 and abs(drawn.std().item() - 1) < 0.05


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_step_noise_and_rows_on_cuda_other_item_shapes(dtype):
    """test_step_noise_and_rows_on_cuda runs float32 only (items of 4 elements, one 16-byte vector). float64
    items are 4 elements in two vectors, 16-bit ones 8 elements and two Philox calls: per-row timesteps over
    rows shorter than an item, rows of a multiple of it, grid-stride; and the drawn noise of element i is the
    same on the vector path and on the element-wise one (inputs 2 or 8 bytes past 16-byte alignment)."""
    sched = D.ddpm_schedule(100, device="cuda")
    for shape in [(1000, 3, 1), (5, 1, 12), (3, 7, 4000), (2, 4, 1028), (300, 16, 2048)]:
        m, x, z = step_inputs(shape, dtype, "cuda")
        t = torch.randint(1, 100, (shape[0],), device="cuda")
        assert_close(D.ddpm_step(m, t, x, sched, z), R.ddpm_step(m, t, x, sched, z), dtype)
        tp = (t - 7).clamp(min=-1)
        assert_close(D.ddim_step(m, t, tp, x, sched, 0.5, z), R.ddim_step(m, t, tp, x, sched, 0.5, z), dtype)
        n = m.numel()
        m_off, x_off = (torch.empty(n + 1, dtype=dtype, device="cuda")[1:].view(shape).copy_(a) for a in (m, x))
        same = torch.full((shape[0],), 40, device="cuda")
        for step in (lambda m, x: D.ddpm_step(m, same, x, sched), lambda m, x: D.ddim_step(m, same, same - 9, x,
                                                                                             sched, 1.0)):
            torch.manual_seed(3)
            aligned = step(m, x)
            torch.manual_seed(3)
            assert_close(step(m_off, x_off), aligned, dtype)
        torch.manual_seed(3)
        drawn = (D.ddpm_step(m, same, x, sched).double() - D.ddpm_step(m, same, x, sched, torch.zeros_like(x)).double())
        drawn = drawn / sched[40, 7]
        if drawn.numel() >= 1000:  # 5 standard errors, plus room for the 16-bit rounding of both results
            count = drawn.numel()
            assert abs(drawn.mean().item()) < 5 / count ** 0.5 + 0.01
            assert abs(drawn.std().item() - 1) < 5 * (0.5 / count) ** 0.5 + 0.02


def test_narrow_rows_with_per_row_timesteps_cost_about_what_wide_rows_cost():
    # A 2-D toy's samples (B, 2), stepped with t = torch.full((B,), t) as DDPM loops write it: the CPU kernel cut
    # its segments at every row's end, so each row of 2 drew a whole Philox block, looked its coefficients up and
    # set up its loops: 7x the CPU time of rows of 1024 with drawn noise (session 45's CPU review; now ~1.5x). With
    # noise given the step itself is so cheap that the timesteps' per-row reads (the host's range check, the
    # kernel's grouping of equal ones) stay several times its cost, so only the values are compared there.
    n = 1 << 20
    sched = D.ddpm_schedule(1000)
    m, x, z = torch.randn(n), torch.randn(n), torch.randn(n)
    t = {width: torch.full((n // width,), 500) for width in (2, 1024)}

    def step(width, noise=None):
        torch.manual_seed(5)
        return D.ddpm_step(m.view(-1, width), t[width], x.view(-1, width), sched, noise)

    narrow, wide = min_cpu_seconds(lambda: step(2)), min_cpu_seconds(lambda: step(1024))
    assert narrow < 4 * wide, f"rows of 2: {narrow * 1e3:.1f} ms, of 1024: {wide * 1e3:.1f} ms"
    assert torch.equal(step(2).flatten(), step(1024).flatten())
    assert torch.equal(step(2, z.view(-1, 2)).flatten(), step(1024, z.view(-1, 1024)).flatten())


def test_no_noise_at_t0_and_per_row(device):
    sched = D.ddpm_schedule(100, device=device)
    m, x, _ = step_inputs((4, 8, 8), torch.float32, device)
    zero = torch.zeros_like(x)
    assert torch.equal(D.ddpm_step(m, 0, x, sched), D.ddpm_step(m, 0, x, sched, zero))
    t = torch.tensor([0, 50, 0, 99], device=device)
    out, det = D.ddpm_step(m, t, x, sched), D.ddpm_step(m, t, x, sched, zero)
    assert torch.equal(out[0], det[0]) and torch.equal(out[2], det[2])
    assert (out[1] != det[1]).all() and (out[3] != det[3]).all()
    # DDIM draws only when eta > 0
    assert torch.equal(D.ddim_step(m, 50, 40, x, sched), D.ddim_step(m, 50, 40, x, sched, 0.0, zero))
    z = (D.ddim_step(m, 50, 40, x, sched, 1.0) - D.ddim_step(m, 50, 40, x, sched, 1.0, zero)).flatten()
    assert z.std() > 0


def test_ddpm_step_on_a_sliced_or_strided_schedule(device):
    """The step goes from row t to row t - 1 of the table it is given, row 0 being the final step
    (abar_prev = 1, no noise), as reference.py and diffusers do. The kernels read the table's precomputed
    posterior columns until session 42: row 0 of S[5:] (the original step 5) added noise, and S[::5]
    stepped each row to the original t - 1 instead of the table's previous row."""
    full = D.ddpm_schedule(50, "squaredcos_cap_v2", device=device)
    m, x, z = step_inputs((4, 8, 3), torch.float32, device)
    for sched in (full[5:], full[::5], full[7::3]):
        T = sched.shape[0]
        for prediction in PREDICTIONS:
            for t in [0, 1, T - 1]:
                ours = D.ddpm_step(m, t, x, sched, z, prediction)
                assert_close(ours, R.ddpm_step(m, t, x, sched, z, prediction), torch.float32)
            rows = torch.tensor([0, T - 1, 1, 0], device=device)
            assert_close(D.ddpm_step(m, rows, x, sched, z, prediction),
                         R.ddpm_step(m, rows, x, sched, z, prediction), torch.float32)
        # t = 0 draws nothing: the result is the noiseless one whatever the seed
        assert torch.equal(D.ddpm_step(m, 0, x, sched), D.ddpm_step(m, 0, x, sched, torch.zeros_like(x)))
        rows = torch.tensor([0, 1, 0, 2], device=device)
        drawn, noiseless = D.ddpm_step(m, rows, x, sched), D.ddpm_step(m, rows, x, sched, torch.zeros_like(x))
        assert torch.equal(drawn[[0, 2]], noiseless[[0, 2]])


# ---------------------------------------------------------------- diffusers itself

def _cpu_noise(seed, shape, dtype, device):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=dtype).to(device)


@pytest.mark.parametrize("prediction", PREDICTIONS)
@pytest.mark.parametrize("kind", SCHEDULES)
def test_ddpm_matches_diffusers(device, kind, prediction):
    diffusers = pytest.importorskip("diffusers")
    T = 1000
    ref = diffusers.DDPMScheduler(num_train_timesteps=T, beta_schedule=kind, prediction_type=prediction,
                                  clip_sample=True, variance_type="fixed_small")
    sched = D.ddpm_schedule(T, kind, device=device)
    # diffusers builds the schedule in float32 (ours is float64): same betas and alphas_cumprod...
    torch.testing.assert_close(ref.betas.double(), sched[:, 0].cpu(), atol=0, rtol=1e-6)
    torch.testing.assert_close(ref.alphas_cumprod.double(), sched[:, 1].cpu(), atol=0, rtol=3e-5)
    # ...but its float32 1 - abar_t / abar_{t-1} cancels to ~1e-3 relative error at small t, so the
    # step is compared with diffusers running on our float64 alphas_cumprod.
    ref.alphas_cumprod, ref.one = sched[:, 1].cpu(), torch.tensor(1.0, dtype=torch.float64)
    m, x, _ = step_inputs((2, 16, 2), torch.float32, device)
    for t in [T - 1, 700, 10, 1, 0]:
        expected = ref.step(m, t, x, generator=torch.Generator().manual_seed(t)).prev_sample
        ours = D.ddpm_step(m, t, x, sched, _cpu_noise(t, x.shape, x.dtype, device), prediction)
        assert_close(ours, expected, torch.float32)


@pytest.mark.parametrize("prediction", PREDICTIONS)
def test_ddim_matches_diffusers(device, prediction):
    diffusers = pytest.importorskip("diffusers")
    T, n = 1000, 25
    ref = diffusers.DDIMScheduler(num_train_timesteps=T, beta_schedule="squaredcos_cap_v2", clip_sample=True,
                                  set_alpha_to_one=True, prediction_type=prediction)
    ref.set_timesteps(n)
    sched = D.ddpm_schedule(T, "squaredcos_cap_v2", device=device)
    ref.alphas_cumprod = sched[:, 1].cpu()  # float64, as in test_ddpm_matches_diffusers
    m, x, _ = step_inputs((2, 16, 2), torch.float32, device)
    for i, t in enumerate(ref.timesteps.tolist()):
        tp = t - T // n
        expected = ref.step(m, t, x, eta=0.5, generator=torch.Generator().manual_seed(i)).prev_sample
        ours = D.ddim_step(m, t, max(tp, -1), x, sched, 0.5, _cpu_noise(i, x.shape, x.dtype, device), prediction)
        assert_close(ours, expected, torch.float32)


# ---------------------------------------------------------------- bad input

def test_step_bad_input(device):
    sched = D.ddpm_schedule(100, device=device)
    m, x, z = step_inputs((4, 8, 2), torch.float32, device)
    with pytest.raises(BAD, match="t must be in"):
        D.ddpm_step(m, 100, x, sched)
    with pytest.raises(BAD, match="t must be in"):
        D.ddpm_step(m, -1, x, sched)
    if device == "cpu":
        with pytest.raises(BAD, match="t must be in"):
            D.ddpm_step(m, torch.tensor([1, 2, 100, 3]), x, sched)
    with pytest.raises(BAD, match="t must be an int64 or int32"):
        D.ddpm_step(m, torch.tensor(3.0, device=device), x, sched)
    with pytest.raises(BAD, match="t must have 1 or"):
        D.ddpm_step(m, torch.tensor([1, 2], device=device), x, sched)
    with pytest.raises(BAD, match="model_output"):
        D.ddpm_step(m[:, :4], 3, x, sched)
    with pytest.raises(BAD, match="model_output"):
        D.ddpm_step(m.double(), 3, x, sched)
    with pytest.raises(BAD, match="noise"):
        D.ddpm_step(m, 3, x, sched, z[:2])
    with pytest.raises(BAD, match="schedule"):
        D.ddpm_step(m, 3, x, sched[:, :5])
    with pytest.raises(BAD, match="schedule"):
        D.ddpm_step(m, 3, x, sched.float())
    with pytest.raises(BAD, match="prediction_type"):
        D.ddpm_step(m, 3, x, sched, prediction_type="eps")
    with pytest.raises(BAD, match="clip_sample_range"):
        D.ddpm_step(m, 3, x, sched, clip_sample_range=0.0)
    with pytest.raises(BAD, match="sample"):
        D.ddpm_step(m[0, 0, 0], 3, x[0, 0, 0], sched)
    with pytest.raises(BAD, match="t_prev"):
        D.ddim_step(m, 10, 10, x, sched)
    with pytest.raises(BAD, match="t_prev"):
        D.ddim_step(m, 10, -2, x, sched)
    with pytest.raises(BAD, match="eta"):
        D.ddim_step(m, 10, 5, x, sched, -0.1)
    with pytest.raises(BAD, match="beta_schedule"):
        D.ddpm_schedule(10, "cosine")
    with pytest.raises(BAD, match="num_train_timesteps"):
        D.ddpm_schedule(0)
    with pytest.raises(BAD, match="beta_end"):
        D.ddpm_schedule(10, "linear", 1e-4, 1.5)


@needs_cuda
def test_device_timesteps_out_of_range_give_nan_rows():
    sched = D.ddpm_schedule(100, device="cuda")
    m, x, z = step_inputs((3, 8, 4), torch.float32, "cuda")
    t = torch.tensor([5, 100, -3], device="cuda")  # cannot be checked without a host sync
    out = D.ddpm_step(m, t, x, sched, z)
    assert_close(out[0], R.ddpm_step(m[:1], 5, x[:1], sched, z[:1])[0], torch.float32)
    assert out[1:].isnan().all()
    out = D.ddim_step(m, torch.tensor([5, 5, 5], device="cuda"), torch.tensor([4, 5, -2], device="cuda"), x, sched)
    assert torch.isfinite(out[0]).all() and out[1:].isnan().all()
    with pytest.raises(BAD, match="schedule"):
        D.ddpm_step(m, 3, x, sched.cpu())
    with pytest.raises(BAD, match="t is on"):
        D.ddpm_step(m, torch.tensor([1, 2, 3]), x, sched)  # per-row t must live on the device
    with pytest.raises(BAD, match="schedule"):
        D.ddpm_step(m.cpu(), 3, x.cpu(), sched)  # dispatched to CUDA by the schedule alone
    with pytest.raises(BAD, match="weight"):
        args = _conv_inputs(1, 4, 4, 5, 3, torch.float32, "cpu")
        D.conv1d_gn_mish(args[0], args[1].cuda(), *args[2:], 2)


# ---------------------------------------------------------------- opcheck / compile / graphs

def test_opcheck_steps(device):
    sched = D.ddpm_schedule(20, device=device)
    m, x, z = step_inputs((2, 4, 4), torch.float32, device)
    t = torch.tensor([3, 0], device=device)
    torch.library.opcheck(D.ops.ddpm_step, (m, t, x, sched, z, "v_prediction", True, 1.0))
    torch.library.opcheck(D.ops.ddim_step, (m, t + 5, t, x, sched, 0.3, z))
    # random draws differ between runs: only the checks that do not compare outputs
    torch.library.opcheck(D.ops.ddpm_step, (m, t, x, sched), test_utils=("test_schema", "test_faketensor"))


def test_torch_compile_fullgraph():
    sched = D.ddpm_schedule(20)
    conv = torch.nn.Conv1d(4, 8, 5, padding=2)
    gn = torch.nn.GroupNorm(2, 8)
    head = torch.nn.Conv1d(8, 4, 1)

    def denoise(x, t, noise):
        h = D.conv1d_gn_mish(x, conv.weight, conv.bias, gn.weight, gn.bias, 2)
        return D.ddpm_step(head(h), t, x, sched, noise)

    x, noise, t = torch.randn(2, 4, 16), torch.randn(2, 4, 16), torch.tensor([5, 7])
    with torch.no_grad():
        expected = denoise(x, t, noise)
        compiled = torch.compile(denoise, fullgraph=True)(x, t, noise)
    assert_close(compiled, expected, torch.float32)


def test_compiled_step_with_int_timesteps_compiles_twice():
    """A compiled step called with Python int timesteps, one per step of a denoising loop: as torch.tensor(t)
    in plain PyTorch, a second value makes t symbolic and that graph serves every later t. _as_timestep's
    operator.index pinned each value (a guard t == 49, then t == 48, ...), so every step compiled again, and
    at the ninth timestep torch.compile(fullgraph=True) raised FailOnRecompileLimitHit."""
    from torch._dynamo.utils import counters

    sched = D.ddpm_schedule(50)

    def step(x, t, t_prev):
        return D.ddpm_step(x * 0.1, t, x, sched, torch.zeros_like(x)) + D.ddim_step(x, t, t_prev, x, sched)

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(step, fullgraph=True)
    x = torch.randn(3, 4)
    for t in range(49, 30, -1):
        assert_close(compiled(x, t, t - 2), step(x, t, t - 2), torch.float32)
    assert counters["stats"]["unique_graphs"] <= 2
    with pytest.raises(ValueError, match="t must be in"):  # still range-checked on the host
        compiled(x, 50, 3)


@pytest.mark.parametrize("per_row", [True, False], ids=["t_per_row", "t_scalar"])
def test_steps_dynamic_batch_compile_once_and_export(device, per_row):
    # The batch B of model_output / sample (and noise, and t given per row) varies; t may be one scalar.
    T = 50
    sched = D.ddpm_schedule(T, device=device)

    def make_args(n):
        m, x, z = step_inputs((n, 4, 6), torch.float32, device)
        t = torch.randint(10, T, (n,), device=device) if per_row else torch.tensor(17, device=device)
        return m, t, t - 7, x, z

    check_dynamic_batch(lambda m, t, tp, x, z: D.ddpm_step(m, t, x, sched, z, "v_prediction"), make_args)
    check_dynamic_batch(lambda m, t, tp, x, z: D.ddpm_step(m, t, x, sched) * 2, make_args)  # noise drawn
    check_dynamic_batch(lambda m, t, tp, x, z: D.ddim_step(m, t, tp, x, sched, 0.5, z), make_args)
    check_dynamic_batch(lambda m, t, tp, x, z: D.ddim_step(m, t, tp, x, sched, 1.0) + x, make_args)


@needs_graphs
@needs_cuda
def test_cuda_graph_replays_the_whole_loop():
    T, steps = 50, 10
    sched = D.ddpm_schedule(T, "squaredcos_cap_v2", device="cuda")
    ts = torch.arange(steps - 1, -1, -1, device="cuda")
    static_x = torch.randn(1, 16, 2, device="cuda")
    static_noise = torch.randn(steps, 1, 16, 2, device="cuda")

    def loop(noise):
        x = static_x
        for i in range(steps):
            x = D.ddpm_step(torch.tanh(x), ts[i], x, sched, None if noise is None else static_noise[i])
        return x

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        loop(True), loop(None)  # warm up outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    g_det, g_rand = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(g_det):
        out_det = loop(True)
    with torch.cuda.graph(g_rand):
        out_rand = loop(None)
    for _ in range(2):
        static_x.copy_(torch.randn(1, 16, 2, device="cuda"))
        g_det.replay()
        expected = static_x
        for i in range(steps):
            expected = R.ddpm_step(torch.tanh(expected), int(ts[i]), expected, sched, static_noise[i])
        assert_close(out_det, expected, torch.float32, scale=10)
    g_rand.replay()
    first = out_rand.clone()
    g_rand.replay()
    assert not torch.equal(first, out_rand)  # each replay draws fresh noise


# ---------------------------------------------------------------- conv1d_gn_mish

# (B, C_in, C_out, L, K, groups): batch 1..64, channels 2..2048, length 1..256, kernel 1/3/5/7.
CONV_SHAPES = [
    (1, 256, 256, 16, 5, 8),     # diffusion policy at batch 1 (direct kernel on CUDA)
    (1, 2048, 16, 4, 5, 8),      # many input channels: several shared-memory chunks
    (2, 600, 24, 40, 7, 4),      # several length tiles, odd channel counts
    (1, 3, 2, 1, 1, 1),          # length 1, kernel 1
    (64, 32, 64, 16, 5, 8),      # large batch (cuDNN on CUDA)
    (5, 2, 6, 256, 3, 3),        # long sequence
    (3, 130, 2048, 3, 3, 16),    # wide output
    (1, 1024, 512, 4, 5, 8),     # U-Net bottleneck
    (2, 64, 32, 8, 3, 4),        # 8-position tiles
]


def _conv_inputs(B, cin, cout, L, K, dtype, device, bias=True):
    def r(*s, scale=1.0):
        return (torch.randn(*s, dtype=torch.float64) * scale).to(dtype=dtype, device=device)

    x = r(B, cin, L)
    w = r(cout, cin, K, scale=(cin * K) ** -0.5)
    b = r(cout, scale=0.5) if bias else None
    return x, w, b, 1 + r(cout, scale=0.2), r(cout, scale=0.2)


@pytest.mark.parametrize("shape", CONV_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_conv1d_gn_mish_matches_reference(device, shape):
    B, cin, cout, L, K, G = shape
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        for dtype in [torch.float32, torch.float64] if device == "cpu" or B * L < 512 else [torch.float32]:
            args = _conv_inputs(B, cin, cout, L, K, dtype, device)
            ours = D.conv1d_gn_mish(*args, G)
            # float32: the convolution's summation order differs (up to 10^4 terms)
            assert_close(ours, R.conv1d_gn_mish(*args, G), dtype, scale=10 if dtype == torch.float32 else 1)


def test_conv1d_gn_mish_across_the_activation_range(device):
    # An identity convolution and one group, so the pre-activations are gamma * z + beta with z the
    # normalized input: they span about [-250, 250], through Mish's tails (CPU: one exponential,
    # clamped at 20; overflow there would give NaN) and its bend near zero.
    torch.manual_seed(0)
    channels, length = 64, 256
    x = torch.randn(1, channels, length).double()  # float32 values: ours and the float64 reference see the same
    weight = torch.eye(channels, dtype=torch.float64)[:, :, None]
    gamma = torch.where(torch.arange(channels) % 2 == 0, 40.0, 0.5).double()  # wide and narrow channels
    beta = torch.linspace(-90.0, 90.0, channels).double()
    beta[0], beta[1] = -math.inf, math.inf  # Mish(-inf) is NaN, Mish(inf) inf
    expected = R.conv1d_gn_mish(x, weight, None, gamma, beta, 1).float()
    args = [t.float().to(device) for t in (x, weight)] + [None] + [t.float().to(device) for t in (gamma, beta)]
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        ours = D.conv1d_gn_mish(*args, 1).cpu()
    pre = (gamma[:, None] * torch.nn.functional.group_norm(x, 1)[0] + beta[:, None])[2:]
    assert pre.min() < -150 and pre.max() > 150 and ((pre > -1) & (pre < 1)).any()
    assert expected[0, 0].isnan().all() and expected[0, 1].isposinf().all()
    assert ours[0, 0].isnan().all() and ours[0, 1].isposinf().all()
    # float32 rounds gamma * z + beta at the scale of its terms (up to ~250), and near Mish's bend the
    # two cancel: the error bound is a few float32 ulps of |gamma * z| + |beta|, not of the result
    # (the H100 missed a flat 2e-6 by 0.5e-6 where 40 z ~ 67 met beta ~ -67; session 14).
    terms = (gamma[:, None] * torch.nn.functional.group_norm(x, 1)[0]).abs() + beta[:, None].abs()
    bound = 1e-6 + 4 * torch.finfo(torch.float32).eps * terms[2:]
    error = (ours[0, 2:].double() - expected[0, 2:].double()).abs()
    assert (error <= bound).all(), f"worst error {error.max():.3g} against bound {bound.flatten()[error.argmax()]:.3g}"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_conv1d_gn_mish_half(device, dtype):
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        for B, cin, cout, L, K, G in [CONV_SHAPES[0], CONV_SHAPES[4], (2, 16, 8, 9, 3, 2)]:
            args = _conv_inputs(B, cin, cout, L, K, dtype, device)
            ours = D.conv1d_gn_mish(*args, G)
            assert ours.dtype == dtype
            # against float32 math on the same (rounded) inputs; the kernel accumulates in float32
            expected = R.conv1d_gn_mish(*(a.float() for a in args), G).to(dtype)
            assert_close(ours, expected, dtype, scale=2)


# The one-launch CUDA path (GroupNorm through a thread-block cluster of the group's blocks) runs when
# L_out <= 16, B <= 8, K <= 7 and a group's channels fit at most 16 blocks of at most 16 channels; the
# rest falls back to the direct kernel (or cuDNN) + a GroupNorm kernel. (B, C_in, C_out, L, K, groups)
# around those edges:
FUSED_SHAPES = [
    (1, 256, 256, 16, 5, 8),    # diffusion policy at batch 1: clusters of 16 blocks of 2 channels
    (3, 256, 256, 13, 5, 8),    # B > 1, L not a multiple of 4
    (1, 37, 12, 7, 3, 3),       # odd C_in, clusters of 4 one-channel blocks
    (2, 5, 24, 3, 5, 2),        # clusters of 12 blocks, K > L, 4-position tiles
    (1, 64, 32, 8, 3, 1),       # one group of 32 channels: a full cluster
    (1, 2048, 64, 16, 5, 8),    # several input-channel chunks of shared memory
    (8, 16, 16, 16, 5, 2),      # largest direct batch
    (1, 16, 24, 16, 5, 4),      # 6 channels per group: clusters of 6 blocks
    (1, 16, 512, 16, 5, 8),     # 64 channels per group: clusters of 16 blocks of 4 channels
    (1, 1024, 1024, 4, 5, 8),   # U-Net bottleneck: 128 channels per group, 16 blocks of 8
    (1, 16, 2048, 4, 5, 1),     # 2048 channels in one group: more than one cluster, falls back
    (1, 8, 8, 17, 3, 2),        # two length tiles: falls back
    (1, 2, 256, 1, 1, 8),       # length 1
    (1, 64, 32, 16, 9, 4),      # kernel 9: cuDNN + the GroupNorm kernel
    (2, 48, 40, 12, 6, 5),      # even kernel (explicit padding below), 8 channels per group
]


@needs_cuda
@pytest.mark.parametrize("shape", FUSED_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_conv1d_gn_mish_fused_cuda(shape, dtype):
    B, cin, cout, L, K, G = shape
    group_args = (G,) if K % 2 else (G, K // 2)  # num_groups[, padding]: an even kernel needs its padding
    for bias in (True, False):
        args = _conv_inputs(B, cin, cout, L, K, dtype, "cuda", bias=bias)
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):  # kernel 9 runs on cuDNN
            ours = D.conv1d_gn_mish(*args, *group_args)
            reference_args = ((a.double() if a is not None else None) for a in args)
            expected = R.conv1d_gn_mish(*reference_args, *group_args).to(dtype)
            assert torch.equal(ours, D.conv1d_gn_mish(*args, *group_args))  # deterministic
        assert_close(ours, expected, dtype, scale=10 if dtype == torch.float32 else 2)
    if not GRAPHS_WORK:  # tools/sanitize.sh runs without the caching allocator
        return
    # a CUDA graph replays the cluster launch
    graph = torch.cuda.CUDAGraph()
    static = D.conv1d_gn_mish(*args, *group_args)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        static = D.conv1d_gn_mish(*args, *group_args)
    args[0].mul_(-1)
    graph.replay()
    assert torch.equal(static, D.conv1d_gn_mish(*args, *group_args))


# Batch x length past the direct kernel: cuDNN convolves without the bias, then the GroupNorm + Mish
# kernel adds the bias as it reads. Its variants by group size n = C_out / G * L: a block per group with
# 1, 2, 4 or 8 values per thread in registers (n <= 128, 256, 512, 1024), read three times above that.
# (B, C_in, C_out, L, K, groups):
CUDNN_SHAPES = [
    (16, 8, 16, 16, 3, 8),       # n = 32: one warp
    (12, 8, 24, 13, 3, 4),       # n = 78: not a multiple of the warp
    (9, 4, 6, 1, 1, 3),          # length 1, n = 2
    (12, 8, 24, 10, 3, 1),       # n = 240: two values per thread, the last ones past n
    (16, 16, 64, 16, 5, 2),      # n = 512
    (16, 32, 64, 16, 5, 1),      # n = 1024
    (10, 4, 8, 100, 3, 1),       # n = 800 over 8 channels of length 100 (the kernel's float channel index)
    (4, 2, 4, 500, 3, 2),        # n = 1000, two channels of length 500
    (10, 16, 120, 9, 3, 1),      # n = 1080: read three times
    (256, 256, 512, 16, 5, 8),   # the benchmark's large batch (n = 1024)
]


@needs_cuda
@pytest.mark.parametrize("shape", CUDNN_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_conv1d_gn_mish_cudnn_cuda(shape, dtype):
    B, cin, cout, L, K, G = shape
    for bias in (True, False):
        args = _conv_inputs(B, cin, cout, L, K, dtype, "cuda", bias=bias)
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            ours = D.conv1d_gn_mish(*args, G)
        expected = R.conv1d_gn_mish(*((a.double() if a is not None else None) for a in args), G)
        assert_close(ours, expected.to(dtype), dtype, scale=10 if dtype == torch.float32 else 2)


@needs_cuda
@pytest.mark.parametrize("portable_only", [False, True])
def test_conv1d_gn_mish_large_clusters_stay_on_after_an_odd_first_grid(portable_only):
    # Clusters of more than 8 blocks are asked of the device once per process, at the first call that
    # needs them. Asked with that call's grid (here 24 blocks in clusters of 12), the query failed and
    # turned them off for good: 256 -> 256 at batch 1 then ran in two launches (found by
    # compute-sanitizer). A fresh process, so the first call is the odd one.
    # JITKERNELS_PORTABLE_CLUSTERS=1 (sanitize.sh's synccheck) turns them off on purpose.
    script = """
import torch, loader
D = loader.diffusion
def run(cin, cout, groups):
    x, w = torch.randn(1, cin, 16, device="cuda"), torch.randn(cout, cin, 5, device="cuda") * 0.1
    ones, zeros = torch.ones(cout, device="cuda"), torch.zeros(cout, device="cuda")
    return D.conv1d_gn_mish(x, w, zeros, ones, zeros, groups)
run(24, 48, 2)  # 24 channels per group: clusters of 12 blocks, a grid of 24
torch.cuda.synchronize()
cuda = torch.profiler.ProfilerActivity.CUDA
with torch.profiler.profile(activities=[cuda]) as prof:
    run(256, 256, 8)  # clusters of 16
    torch.cuda.synchronize()
print("|".join(e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA))
"""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    env = dict(os.environ, JITKERNELS_PORTABLE_CLUSTERS="1" if portable_only else "0")
    done = subprocess.run([sys.executable, "-c", script], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    kernels = done.stdout.strip().splitlines()[-1]
    assert "conv1d_direct_kernel" in kernels, kernels
    if portable_only:
        assert "diffusion::gn_mish" in kernels, f"clusters of 16 ran although turned off: {kernels}"
    else:
        assert "diffusion::gn_mish" not in kernels, f"GroupNorm ran as a second launch: {kernels}"


@needs_cuda
@needs_two_gpus
def test_cuda_second_device_while_current_is_0():
    # tensors on cuda:1, the current device 0, cuda:1's current stream a side stream (conftest.on_two_gpus):
    # the steps (vector and scalar paths, per-row timesteps read on cuda:1, noise drawn from cuda:1's default
    # generator) and conv1d_gn_mish (clusters of 16 blocks, whose support is asked per device, of 3 blocks,
    # the unfused direct kernel, cuDNN) give on cuda:1 what they give on cuda:0
    sched = D.ddpm_schedule(100)
    for shape in [(4, 16, 64), (3, 5, 7)]:
        for dtype in (torch.float32, torch.float16):
            m, x, z = step_inputs(shape, dtype, "cpu")
            t = torch.tensor([0, 99, 7, 40][: shape[0]])
            cases = [
                (lambda m, t, x, s: D.ddpm_step(m, t, x, s), (m, t, x, sched)),
                (lambda m, x, s: D.ddpm_step(m, 40, x, s), (m, x, sched)),
                (lambda m, t, x, s, z: D.ddpm_step(m, t, x, s, z, "v_prediction"), (m, t, x, sched, z)),
                (lambda m, t, x, s: D.ddim_step(m, t, (t - 5).clamp(min=-1), x, s, 0.5), (m, t, x, sched)),
                (lambda m, t, x, s, z: D.ddim_step(m, t, (t - 5).clamp(min=-1), x, s, 1.0, z), (m, t, x, sched, z)),
            ]
            for i, (fn, args) in enumerate(cases):
                want, got = on_two_gpus(fn, *args)
                assert torch.equal(got, want), f"{shape} {dtype} case {i}"
    for shape in [(1, 256, 256, 16, 5, 8), (1, 37, 12, 7, 3, 3), (1, 16, 2048, 4, 5, 1), (16, 8, 16, 16, 3, 8)]:
        B, cin, cout, L, K, G = shape
        args = _conv_inputs(B, cin, cout, L, K, torch.float32, "cpu")
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            want, got = on_two_gpus(lambda *a: D.conv1d_gn_mish(*a, G), *args)
        assert_close(got, want, torch.float32)


def test_conv1d_gn_mish_options(device):
    x, w, b, gw, gb = _conv_inputs(2, 6, 8, 11, 4, torch.float64, device, bias=False)
    for pad in (0, 1, 3):  # even kernel with explicit padding, no bias
        assert_close(D.conv1d_gn_mish(x, w, None, gw, gb, 4, pad, 1e-3),
                     R.conv1d_gn_mish(x, w, None, gw, gb, 4, pad, 1e-3), torch.float64)
    big = b if b is not None else torch.full_like(gw, 100.0)  # group mean >> std: two-pass statistics
    assert_close(D.conv1d_gn_mish(x, w, big, gw, gb, 2, 2), R.conv1d_gn_mish(x, w, big, gw, gb, 2, 2),
                 torch.float64, scale=1e3)
    assert_close(D.conv1d_gn_mish(x.float(), w.float(), big.float(), gw.float(), gb.float(), 2, 2),
                 R.conv1d_gn_mish(x, w, big, gw, gb, 2, 2).float(), torch.float32, scale=20)
    xt = torch.randn(11, 6, 2, dtype=torch.float64, device=device).permute(2, 1, 0)  # strided x
    assert_close(D.conv1d_gn_mish(xt, w, None, gw, gb, 2, 2), R.conv1d_gn_mish(xt, w, None, gw, gb, 2, 2),
                 torch.float64)
    assert D.conv1d_gn_mish(x[:0], w, None, gw, gb, 4, 2).shape == (0, 8, 12)


def test_conv1d_gn_mish_gradcheck(device):
    x, w, b, gw, gb = _conv_inputs(2, 3, 4, 5, 3, torch.float64, device)
    inputs = tuple(a.requires_grad_() for a in (x, w, b, gw, gb))
    assert torch.autograd.gradcheck(lambda *a: D.conv1d_gn_mish(*a, 2), inputs)
    x, w, _, gw, gb = _conv_inputs(1, 2, 6, 4, 2, torch.float64, device, bias=False)
    inputs = tuple(a.requires_grad_() for a in (x, w, gw, gb))
    assert torch.autograd.gradcheck(lambda x, w, gw, gb: D.conv1d_gn_mish(x, w, None, gw, gb, 3, 1), inputs)


def test_conv1d_gn_mish_forward_mode_where_each_group_holds_one_value(device):
    """B = 1, num_groups = C_out, length 1: the op normalizes each single value to 0 and its backward works, but
    its forward-mode formula ran the reference's F.group_norm, which refuses that shape ("Expected more than 1 value
    per channel when training", session 52's review)."""
    x, w, b, gw, gb = _conv_inputs(1, 3, 4, 1, 3, torch.float64, device)
    inputs = tuple(a.requires_grad_() for a in (x, w, b, gw, gb))
    assert torch.autograd.gradcheck(lambda *a: D.conv1d_gn_mish(*a, 4), inputs, check_forward_ad=True)


def test_conv1d_gn_mish_grad_half(device):
    x, w, b, gw, gb = _conv_inputs(2, 8, 8, 6, 3, torch.bfloat16, device)
    inputs = [a.requires_grad_() for a in (x, w, b, gw, gb)]
    D.conv1d_gn_mish(*inputs, 4).float().square().sum().backward()
    ref = [a.detach().float().requires_grad_() for a in (x, w, b, gw, gb)]
    R.conv1d_gn_mish(*ref, 4).square().sum().backward()
    for a, r in zip(inputs, ref):
        assert a.grad.dtype == torch.bfloat16
        torch.testing.assert_close(a.grad.float(), r.grad, atol=0.05, rtol=0.05)


# (B, C, L, groups): channel sums by a thread (L <= 32: 16, 5, 1) or by a warp (45, 300), groups held in
# registers (up to 1024 values; 1024 at the benchmark's 64 channels x 16) and past them (n = 8192: streaming)
GN_BACKWARD_SHAPES = [(3, 8, 16, 2), (4, 128, 16, 2), (2, 6, 45, 3), (2, 64, 5, 2), (2, 4, 300, 4), (2, 256, 64, 2),
                      (5, 12, 1, 4)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", GN_BACKWARD_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gn_mish_backward_matches_reference(device, shape, dtype):
    B, C, L, G = shape
    gen = torch.Generator().manual_seed(B * C * L)
    def r(*size, scale=1.0, shift=0.0):
        return (torch.randn(*size, generator=gen, dtype=torch.float64) * scale + shift).to(dtype=dtype, device=device)
    z, grad = r(B, C, L, scale=3.0, shift=1.0), r(B, C, L)
    gw, gb = r(C, scale=0.5, shift=1.0), r(C, scale=2.0)  # h spans Mish's curved part and both tails
    got = D.gn_mish_backward(grad, z, gw, gb, G, 1e-5)
    ct = torch.float64 if dtype == torch.float64 else torch.float32
    want = R.gn_mish_backward(grad.to(ct), z.to(ct), gw.to(ct), gb.to(ct), G, 1e-5)
    for g, w in zip(got, want):
        assert g.dtype == dtype
        # sums over a batch of rounded terms: half types get a relative tolerance on the scale of the output
        atol = TOLERANCES[dtype][1] * max(1.0, w.abs().max().item())
        torch.testing.assert_close(g.to(ct), w, rtol=TOLERANCES[dtype][0], atol=atol)
    again = D.gn_mish_backward(grad, z, gw, gb, G, 1e-5)
    for g, a in zip(got, again):  # fixed-order sums: the same bits every run
        assert torch.equal(g, a)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_gn_mish_backward_where_mish_is_linear(device, dtype):
    """GroupNorm outputs h from 14 to 1e30, where Mish' is 1: the float formula over one denominator overflows from
    h ~ 17.7 without its clamp at 15, and the CPU first clamped at 20, so a whole group's gradients were NaN, for
    default-initialised layers too (an outlier of a large group reaches h > 17.7: session 54's review); held at the
    clamp, the formula grew with h (374306 at 1e18)."""
    z = torch.randn(3, 8, 20, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    grad = torch.randn(3, 8, 20, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    gw = torch.full((8,), 1e-3, dtype=torch.float64)  # h ~ gn_bias
    gb = torch.tensor([14.0, 15.0, 17.8, 19.0, 25.0, 60.0, 1e18, 1e30], dtype=torch.float64)
    args = [t.to(device=device, dtype=dtype) for t in (grad, z, gw, gb)]
    got = D.gn_mish_backward(*args, 2, 1e-5)
    ct = torch.float64 if dtype == torch.float64 else torch.float32
    want = R.gn_mish_backward(*(t.to(ct) for t in args), 2, 1e-5)
    for g, w in zip(got, want):
        assert torch.isfinite(g).all()
        torch.testing.assert_close(g.to(ct), w, rtol=TOLERANCES[dtype][0], atol=TOLERANCES[dtype][1] * w.abs().max())


@pytest.mark.parametrize("shape", [(2, 4, 6, 7, 3, 3), (1, 256, 256, 16, 5, 8), (64, 32, 64, 40, 5, 8)],
                         ids=lambda s: "x".join(map(str, s)))
def test_conv1d_gn_mish_keeps_the_convolution_for_backward(device, shape):
    """A call that records a gradient goes to the op's twin, which also returns the convolution's output (bias added):
    the backward saves it instead of recomputing the convolution. The op itself still returns one tensor. shape:
    (B, C_in, C_out, L, K, groups). (TF32 off, so that cuDNN's convolutions, ours and the reference's, round no more
    than the direct kernel: with TF32 on, the kept output's comparison failed on the GPU.)"""
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        _check_kept_convolution(device, *shape)


def _check_kept_convolution(device, B, cin, cout, L, K, G):
    x, w, b, gw, gb = (t.requires_grad_() for t in _conv_inputs(B, cin, cout, L, K, torch.float32, device))
    out = D.conv1d_gn_mish(x, w, b, gw, gb, G)
    assert isinstance(out, torch.Tensor) and out.shape == (B, cout, L)
    kept = out.grad_fn.saved_tensors[-1]
    assert kept.shape == out.shape and not kept.requires_grad
    torch.testing.assert_close(kept, F.conv1d(x, w, b, padding=K // 2).detach(), rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        assert out.grad_fn is not None and D.conv1d_gn_mish(x, w, b, gw, gb, G).grad_fn is None
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, (x, w, b, gw, gb), g)
    want = torch.autograd.grad(R.conv1d_gn_mish(x, w, b, gw, gb, G), (x, w, b, gw, gb), g)
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4 * max(1.0, e.abs().max().item()))


def test_opcheck_gn_mish_backward_and_the_twin(device):
    """opcheck with inputs that require grad runs the twin that keeps the convolution (its fake-tensor kernel, the
    autograd registration, AOT dispatch)."""
    x, w, b, gw, gb = _conv_inputs(2, 4, 6, 7, 3, torch.float32, device)
    torch.library.opcheck(D.ops.gn_mish_backward, (torch.randn(2, 6, 7, device=device), x.new_ones(2, 6, 7) + x[:, :1],
                                                   gw, gb, 3, 1e-5))
    args = tuple(t.requires_grad_() for t in (x, w, b, gw, gb))
    torch.library.opcheck(D.ops.conv1d_gn_mish, (*args, 3))
    torch.library.opcheck(D.ops.conv1d_gn_mish, (args[0], args[1], None, args[3], args[4], 2, 0, 1e-3))


def test_opcheck_conv1d_gn_mish(device):
    x, w, b, gw, gb = _conv_inputs(2, 4, 6, 7, 3, torch.float32, device)
    torch.library.opcheck(D.ops.conv1d_gn_mish, (x, w, b, gw, gb, 3))
    torch.library.opcheck(D.ops.conv1d_gn_mish, (x, w, None, gw, gb, 2, 0, 1e-3))


@pytest.mark.parametrize("bias", [True, False])
def test_conv1d_gn_mish_empty_batch_backward(device, bias):
    """An empty batch is valid input (an empty output): its backward gives zero gradients, as the reference's. The
    backward's reshape(b, groups, -1) of zero elements raised "the unspecified dimension size -1 can be any value"."""
    inputs = [None if t is None else t.double().requires_grad_()
              for t in _conv_inputs(0, 4, 6, 7, 3, torch.float32, device, bias=bias)]
    x, w, b, gw, gb = inputs
    wrt = [t for t in inputs if t is not None]
    got = torch.autograd.grad(D.conv1d_gn_mish(x, w, b, gw, gb, 3).sum(), wrt)
    want = torch.autograd.grad(D.reference.conv1d_gn_mish(x, w, b, gw, gb, 3).sum(), wrt)
    for g, r in zip(got, want):
        torch.testing.assert_close(g, r)
    torch.library.opcheck(D.ops.conv1d_gn_mish, (x, w, b, gw, gb, 3))


def test_conv1d_gn_mish_dynamic_batch_compile_once_and_export(device):
    # x (B, C_in, L): the batch B varies; the weights keep their shapes.
    weights = _conv_inputs(1, 4, 6, 9, 3, torch.float32, device)[1:]
    check_dynamic_batch(lambda x, w, b, gw, gb: D.conv1d_gn_mish(x, w, b, gw, gb, 3),
                        lambda n: (torch.randn(n, 4, 9, device=device), *weights))


def test_conv1d_gn_mish_bad_input(device):
    x, w, b, gw, gb = _conv_inputs(2, 4, 6, 7, 3, torch.float32, device)
    with pytest.raises(BAD, match="num_groups"):
        D.conv1d_gn_mish(x, w, b, gw, gb, 4)
    with pytest.raises(BAD, match="num_groups"):
        D.conv1d_gn_mish(x, w, b, gw, gb, 0)
    with pytest.raises(BAD, match="padding"):
        D.conv1d_gn_mish(x, torch.randn(6, 4, 4, device=device), b, gw, gb, 3)
    with pytest.raises(BAD, match="padding"):
        D.conv1d_gn_mish(x, w, b, gw, gb, 3, -1)
    with pytest.raises(BAD, match="weight"):
        D.conv1d_gn_mish(x, w[:, :3], b, gw, gb, 3)
    with pytest.raises(BAD, match="weight"):
        D.conv1d_gn_mish(x, w.double(), b, gw, gb, 3)
    with pytest.raises(BAD, match="gn_weight"):
        D.conv1d_gn_mish(x, w, b, gw[:5], gb, 3)
    with pytest.raises(BAD, match="gn_bias"):
        D.conv1d_gn_mish(x, w, b, gw, gb[None], 3)
    with pytest.raises(BAD, match="bias"):
        D.conv1d_gn_mish(x, w, b[:2], gw, gb, 3)
    with pytest.raises(BAD, match="x"):
        D.conv1d_gn_mish(x[0], w, b, gw, gb, 3)
    with pytest.raises(BAD, match="x has length"):
        D.conv1d_gn_mish(x[..., :1], torch.randn(6, 4, 5, device=device), b, gw, gb, 3, 0)
    with pytest.raises(BAD, match="eps"):
        D.conv1d_gn_mish(x, w, b, gw, gb, 3, None, -1.0)


def test_conv1d_gn_mish_refuses_zero_input_channels(device):
    # C_in = 0: PyTorch's conv1d returns (B, 0, L) (the reference then raises in group_norm). The op
    # returned uninitialized memory on the CPU (its GroupNorm pass read a y of 0 channels as C_out of them),
    # and on CUDA the fused direct kernel's blocks grew to 16 channels of one warp each (no input channels:
    # splits = 0 bounded nothing), 512 threads past its 256-thread launch bound and its 8-warp shared arrays;
    # cuDNN's empty y, at the larger batch, was read as (B, C_out, L). Refused by name now.
    cout = 1024
    w = torch.randn(cout, 0, 3, device=device)
    b, gw, gb = (torch.randn(cout, device=device) for _ in range(3))
    for batch in (8, 64):  # the direct kernel (B x tiles <= 8), then cuDNN + the GroupNorm kernel
        with pytest.raises(BAD, match="C_in >= 1"):
            D.conv1d_gn_mish(torch.randn(batch, 0, 4, device=device), w, b, gw, gb, 32)


def test_conv1d_gn_mish_refuses_zero_length(device):
    # x of length 0 with padding enough for an output (L_out = 0 + 2 * 5 - 3 + 1 = 8): PyTorch's conv1d (the
    # reference's, and the op's CPU route) refuses it with its own message ("Only zero batch or zero channel
    # inputs are supported"), the CUDA direct kernel convolved the zero padding alone, and the Meta kernel
    # accepted it, so torch.compile traced a call that then failed. Refused by name on every device now;
    # an empty batch still gives an empty output, as the reference's.
    from torch._subclasses.fake_tensor import FakeTensorMode

    w = torch.randn(8, 4, 3, device=device)
    b, gw, gb = (torch.randn(8, device=device) for _ in range(3))
    x = torch.randn(2, 4, 0, device=device)
    with pytest.raises(BAD, match="x has length 0"):
        D.conv1d_gn_mish(x, w, b, gw, gb, 2, 5)
    with FakeTensorMode() as mode, pytest.raises(BAD, match="x has length 0"):
        D.conv1d_gn_mish(*(mode.from_tensor(t) for t in (x, w, b, gw, gb)), 2, 5)
    assert D.conv1d_gn_mish(x[:0], w, b, gw, gb, 2, 5).shape == (0, 8, 8)


# ---------------------------------------------------------------- property-based: random shapes, strides, dtypes

from hypothesis import assume, given, settings, strategies as st  # noqa: E402


def _maybe_strided(draw, shape, dtype, device):
    """A tensor of `shape`: contiguous, a transposed copy's view, or every other element of a wider one."""
    layout = draw(st.sampled_from(["contiguous", "transposed", "sliced"]))
    if layout == "transposed":
        base = torch.randn(shape[::-1], dtype=torch.float64).to(dtype=dtype, device=device)
        return base.permute(*reversed(range(len(shape))))
    if layout == "sliced":
        base = torch.randn(*shape[:-1], 2 * shape[-1], dtype=torch.float64).to(dtype=dtype, device=device)
        return base[..., ::2]
    return torch.randn(shape, dtype=torch.float64).to(dtype=dtype, device=device)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_steps_property(device, data):
    draw = data.draw
    shape = (draw(st.integers(1, 5)), draw(st.integers(1, 6)), draw(st.integers(1, 9)))
    dtype = draw(st.sampled_from(STEP_DTYPES))
    T = draw(st.integers(2, 50))
    sched = D.ddpm_schedule(T, draw(st.sampled_from(SCHEDULES)), device=device)
    m, x, z = (_maybe_strided(draw, shape, dtype, device) for _ in range(3))
    prediction, clip = draw(st.sampled_from(PREDICTIONS)), draw(st.booleans())
    clip_range = draw(st.floats(0.5, 3.0))
    if draw(st.booleans()):  # one timestep per row, on the device
        t = torch.tensor(draw(st.lists(st.integers(1, T - 1), min_size=shape[0], max_size=shape[0])), device=device)
        t_prev = t - torch.tensor(draw(st.lists(st.integers(1, 5), min_size=shape[0], max_size=shape[0])),
                                  device=device)
        t_prev = t_prev.clamp(min=-1)
    else:
        t = draw(st.integers(0, T - 1))
        t_prev = draw(st.integers(-1, t - 1))
    ours = D.ddpm_step(m, t, x, sched, z, prediction, clip, clip_range)
    assert ours.is_contiguous() and ours.dtype == dtype
    assert_close(ours, R.ddpm_step(m, t, x, sched, z, prediction, clip, clip_range), dtype, scale=2)
    if isinstance(t, int) and t == 0:
        return
    eta = draw(st.sampled_from([0.0, 0.5]))
    args = (eta, z, prediction, clip, clip_range, draw(st.booleans()), draw(st.booleans()))
    assert_close(D.ddim_step(m, t, t_prev, x, sched, *args), R.ddim_step(m, t, t_prev, x, sched, *args), dtype,
                 scale=2)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_conv1d_gn_mish_property(device, data):
    draw = data.draw
    B, cin, L, K = draw(st.integers(1, 3)), draw(st.integers(1, 9)), draw(st.integers(1, 12)), draw(st.integers(1, 5))
    G = draw(st.integers(1, 4))
    cout = G * draw(st.integers(1, 5))
    pad = None if K % 2 == 1 and draw(st.booleans()) else draw(st.integers(max(0, (K - L + 1) // 2), 3))
    l_out = L + 2 * (K // 2 if pad is None else pad) - K + 1
    assume(cout // G * l_out >= 2)  # F.group_norm rejects groups of one value
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    x = _maybe_strided(draw, (B, cin, L), dtype, device)
    w = _maybe_strided(draw, (cout, cin, K), dtype, device) * (cin * K) ** -0.5
    b = _maybe_strided(draw, (cout,), dtype, device) if draw(st.booleans()) else None
    gw, gb = 1 + 0.2 * _maybe_strided(draw, (cout,), dtype, device), _maybe_strided(draw, (cout,), dtype, device)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        ours = D.conv1d_gn_mish(x, w, b, gw, gb, G, pad)
        expected = R.conv1d_gn_mish(x, w, b, gw, gb, G, pad)
    # a group of a few values has a tiny variance: GroupNorm amplifies rounding, hence the scale
    assert_close(ours, expected, dtype, scale=50 if dtype == torch.float32 else 10)


# ---------------------------------------------------------------- session 40's review

def test_an_empty_batch_still_checks_a_scalar_timestep():
    sched = D.ddpm_schedule(50)
    empty = torch.randn(0, 4)
    with pytest.raises(ValueError, match=r"\bt must be in"):
        D.ddpm_step(empty, 1000, empty, sched)
    with pytest.raises(ValueError, match=r"\bt_prev must be in"):
        D.ddim_step(empty, 5, 9, empty, sched)
    assert D.ddpm_step(empty, torch.zeros(0, dtype=torch.long), empty, sched).shape == (0, 4)



def test_an_empty_batch_checks_ddim_scalar_timesteps_beside_per_row_ones():
    """A scalar t (or t_prev) of an empty batch is host-readable and checked even when the other timestep
    is per-row (empty): until session 44, ddim_step(empty, 500, torch.empty(0, long), ...) with T = 50
    returned an empty tensor instead of raising, as did an empty t with t_prev = -5."""
    sched = D.ddpm_schedule(50)
    empty, no_rows = torch.randn(0, 4), torch.zeros(0, dtype=torch.long)
    with pytest.raises(ValueError, match=r"\bt must be in \[0, 50\)"):
        D.ddim_step(empty, 500, no_rows, empty, sched)
    with pytest.raises(ValueError, match=r"\bt_prev must be in \[-1, T - 1\)"):
        D.ddim_step(empty, no_rows, -5, empty, sched)
    assert D.ddim_step(empty, 10, no_rows, empty, sched).shape == (0, 4)
    assert D.ddim_step(empty, no_rows, -1, empty, sched).shape == (0, 4)
    assert D.ddim_step(empty, no_rows, no_rows, empty, sched).shape == (0, 4)

@pytest.mark.parametrize("bad", [None, 1.7, [1, 2]])
def test_a_timestep_that_is_not_an_integer_is_refused_by_name(bad):
    sched, x = D.ddpm_schedule(50), torch.randn(2, 4)
    with pytest.raises(TypeError, match=r"\bt must be an int"):
        D.ddpm_step(x, bad, x, sched)
    with pytest.raises(TypeError, match=r"\bt_prev must be an int"):
        D.ddim_step(x, 5, bad, x, sched)


def test_steps_trace_with_tensor_timesteps_under_fx():
    """torch.fx.symbolic_trace passes a tensor timestep as a Proxy (a tensor-like, not a torch.Tensor), which
    the steps refused until session 45 ("t must be an int or an integer tensor, got Proxy")."""
    sched = D.ddpm_schedule(50)

    class Denoise(torch.nn.Module):
        def forward(self, m, x, t, t_prev):
            return D.ddpm_step(m, t, x, sched, noise=torch.zeros_like(x)), D.ddim_step(m, t, t_prev, x, sched)

    traced = torch.fx.symbolic_trace(Denoise())
    m, x, t, t_prev = torch.randn(3, 4), torch.randn(3, 4), torch.tensor([7, 3, 9]), torch.tensor([2, -1, 4])
    ddpm, ddim = traced(m, x, t, t_prev)
    assert torch.equal(ddpm, D.ddpm_step(m, t, x, sched, noise=torch.zeros_like(x)))
    assert torch.equal(ddim, D.ddim_step(m, t, t_prev, x, sched))


def test_a_timestep_count_mismatch_under_dynamic_shapes_gives_the_numbers():
    """Under torch.compile(dynamic=True) the batch and t's length are symbols in the Meta kernel, and the message
    said "t must have 1 or sample.size(0) = a symbolic size entries, got a symbolic size" (session 44's message
    review). It now reads the sizes as every other shape message does (an error path: the guard it adds is moot)."""
    torch._dynamo.reset()
    step = torch.compile(lambda eps, t, x, s: D.ddpm_step(eps, t, x, s), dynamic=True, fullgraph=True)
    x = torch.randn(3, 4, 6)
    with pytest.raises(Exception, match=r"t must have 1 or sample\.size\(0\) = 3 entries, got 2\b"):
        step(torch.randn_like(x), torch.tensor([1, 2]), x, D.ddpm_schedule(20))


# ---------------------------------------------------------------- session 46's API review

def test_schedule_columns_are_reachable_where_the_docstring_sends_the_reader():
    """ddpm_schedule's docstring says "Columns: SCHEDULE_COLUMNS", but the family object exposes only ops.py's
    __all__, so loader.diffusion.SCHEDULE_COLUMNS raised AttributeError (ebm's MODELS is exported); the table's
    column indices were reachable only through .module or .reference."""
    assert "SCHEDULE_COLUMNS" in D.ddpm_schedule.__doc__
    columns = D.SCHEDULE_COLUMNS
    assert columns == D.reference.SCHEDULE_COLUMNS
    sched = D.ddpm_schedule(10)
    assert sched.shape[1] == len(columns)
    betas = torch.linspace(1e-4, 0.02, 10, dtype=torch.float64)
    torch.testing.assert_close(sched[:, columns.index("alphas_cumprod")], torch.cumprod(1 - betas, 0))


def test_a_bool_timestep_is_refused():
    """t=True stepped from timestep 1 and t=False took the final step (a bool is an int to Python)."""
    S = D.ddpm_schedule(10)
    x = torch.randn(2, 3)
    for call in (lambda: D.ddpm_step(x, True, x, S), lambda: D.ddim_step(x, 5, False, x, S)):
        with pytest.raises(TypeError, match=r"must be an int or an integer tensor, got bool"):
            call()
