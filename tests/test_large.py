"""Tensors of more than 2^31 elements (64-bit indexing): each elementwise and sampling op gives
the right answer at both ends. GPU only; half-precision tensors keep the memory to ~13 GB per op."""
import pytest
import torch
from conftest import needs_cuda

import loader

N = 2 ** 31 + 4099  # more than 2^31 elements, and not a multiple of the vector width
ENDS = 4096


def _require_gib(gib):
    """Skip unless the GPU has gib GiB free now (asked at run time: collection creates no CUDA context)."""
    if torch.cuda.mem_get_info()[0] < gib * 2 ** 30:
        pytest.skip(f"needs {gib} GiB of free GPU memory")


def _ends(t):
    return torch.cat([t.reshape(-1)[:ENDS], t.reshape(-1)[-ENDS:]])


def _end_rows(n_rows, count):
    """Indices (on the GPU) of the first and the last `count` of n_rows rows."""
    return torch.cat([torch.arange(count), torch.arange(n_rows - count, n_rows)]).cuda()


pytestmark = [needs_cuda, pytest.mark.large]  # tools/gpu_check.sh runs these alone (memory)


@pytest.fixture(autouse=True)
def _free_memory():
    yield
    torch.cuda.empty_cache()


def test_relu_add_both_ends():
    _require_gib(14)
    x = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    out = loader.fused.relu_add(x, y, 0.25)
    # ours rounds once from float32; so does this reference (in bfloat16 it would round twice)
    expected = loader.fused.reference.relu_add(_ends(x).float(), _ends(y).float(), 0.25).bfloat16()
    torch.testing.assert_close(_ends(out), expected)


def test_langevin_step_both_ends():
    _require_gib(14)
    ebm = loader.ebm
    x = torch.randn(N // 16, 16, device="cuda", dtype=torch.bfloat16)
    grad = torch.randn_like(x)
    out = ebm.langevin_step(x, grad, 0.01, noise_scale=0.0)  # no noise: exact expectation
    expected = ebm.reference.langevin_step(_ends(x), _ends(grad), 0.01, noise_scale=0.0)
    torch.testing.assert_close(_ends(out), expected, atol=1e-2, rtol=1e-2)


def test_ddpm_step_both_ends():
    _require_gib(14)
    diffusion = loader.diffusion
    schedule = diffusion.ddpm_schedule(1000, device="cuda")
    shape = (N // 2048, 2, 1024)
    model_output = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    sample = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    out = diffusion.ddpm_step(model_output, 0, sample, schedule)  # t = 0: no noise
    rows = _end_rows(shape[0], 2)
    expected = diffusion.reference.ddpm_step(model_output[rows], 0, sample[rows], schedule)
    torch.testing.assert_close(out[rows], expected, atol=2e-2, rtol=2e-2)


def test_normal_both_ends():
    _require_gib(6)
    d = 1000
    n = N // d + 1
    mean = torch.linspace(-3, 3, d, device="cuda")
    std = torch.linspace(0.5, 2, d, device="cuda")
    out = loader.sampling.normal(mean, std, n, dtype=torch.bfloat16)
    assert out.numel() > 2 ** 31
    for block in (out[:4096], out[-4096:]):  # 4096 draws per column at each end
        z = (block.float() - mean) / std
        assert z.isfinite().all()
        assert z.mean(0).abs().max() < 0.1 and (z.std(0) - 1).abs().max() < 0.1


def test_local_model_scores_and_energies_both_ends():
    """The local-model tile kernels (row · D offsets past 2^31): a separable, a neighbour and a
    row-statistics model."""
    _require_gib(20)
    ebm = loader.ebm
    x = torch.randn(N // 16 + 1, 16, device="cuda", dtype=torch.bfloat16)
    rows = _end_rows(x.shape[0], ENDS // 16)
    for name in ("harmonic", "rosenbrock", "ackley"):
        score = getattr(ebm, f"{name}_score")(x)
        expected = getattr(ebm.reference, f"{name}_score")(x[rows].float()).bfloat16()
        torch.testing.assert_close(score[rows], expected, atol=5e-2, rtol=2e-2, msg=f"{name}_score")
        del score
        energy = getattr(ebm, f"{name}_energy")(x)
        expected = getattr(ebm.reference, f"{name}_energy")(x[rows].float()).bfloat16()
        torch.testing.assert_close(energy[rows], expected, atol=5e-2, rtol=2e-2, msg=f"{name}_energy")


def test_gaussian_score_both_ends():
    _require_gib(20)
    ebm = loader.ebm
    x = torch.randn(N // 16 + 1, 16, device="cuda", dtype=torch.bfloat16)
    mean = torch.randn(16, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(16, 16, device="cuda")
    precision = (a @ a.T / 16 + torch.eye(16, device="cuda")).bfloat16()
    rows = _end_rows(x.shape[0], ENDS // 16)
    args = (mean.float(), precision.float())
    torch.testing.assert_close(ebm.gaussian_score(x, mean, precision)[rows],
                               ebm.reference.gaussian_score(x[rows].float(), *args).bfloat16(), atol=5e-2, rtol=2e-2)
    torch.testing.assert_close(ebm.gaussian_energy(x, mean, precision)[rows],
                               ebm.reference.gaussian_energy(x[rows].float(), *args).bfloat16(), atol=1e-1, rtol=2e-2)


def test_cem_update_elite_at_the_far_end():
    """The elite are the last rows (scores fall with the index), so every elite element lies past 2^31."""
    _require_gib(12)
    d = 1000
    n = N // d + 1
    samples = torch.randn(n, d, device="cuda")  # mean and std must share its dtype
    scores = -torch.arange(n, device="cuda", dtype=torch.float32)  # the best 64 are the last rows
    mean, std = torch.zeros(d, device="cuda"), torch.ones(d, device="cuda")
    new_mean, new_std = loader.sampling.cem_update(samples, scores, 64, mean, std)
    elite = samples[-64:]
    torch.testing.assert_close(new_mean, elite.mean(0), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(new_std, elite.std(0, correction=0), atol=1e-4, rtol=1e-4)


def test_langevin_chain_both_ends():
    _require_gib(20)
    x = torch.randn(N // 16 + 1, 16, device="cuda")
    # harmonic score is -k x: without noise each step scales x by (1 - step_size * k), exactly known
    out = loader.ebm.langevin_chain(x, "harmonic", 3, 0.1, noise_scale=0.0, k=1.0)
    rows = _end_rows(x.shape[0], 4)
    torch.testing.assert_close(out[rows], x[rows] * 0.9 ** 3)


def test_hmc_chain_both_ends():
    _require_gib(20)
    x = torch.randn(N // 16 + 1, 16, device="cuda")
    # one tiny leapfrog step: every proposal is accepted and moves x by about step_size * momentum,
    # so unwritten rows (left as whatever memory held) or untouched ones both fail
    out, accept = loader.ebm.hmc_chain(x, "harmonic", 1, 1e-3, n_leapfrog=1, k=1.0)
    rows = _end_rows(x.shape[0], 4)
    moved = (out[rows] - x[rows]).abs()
    assert (moved.amax(dim=1) > 0).all() and (moved < 1e-2).all()
    assert (accept[rows] == 1).all()


def test_conv1d_gn_mish_both_ends():
    # Large batch x length goes to cuDNN, then our GroupNorm + Mish kernel over more than 2^31
    # outputs (and its float32 intermediate of the same size): ~21 GB in float32.
    _require_gib(28)
    diffusion = loader.diffusion
    batch, c_in, c_out, length, groups = 131072, 8, 72, 256, 8  # 131072 * 72 * 256 > 2^31 outputs
    torch.manual_seed(0)
    x = torch.randn(batch, c_in, length, device="cuda")
    w = torch.randn(c_out, c_in, 5, device="cuda") / (c_in * 5) ** 0.5
    b, gw, gb = (torch.randn(c_out, device="cuda") for _ in range(3))
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        out = diffusion.conv1d_gn_mish(x, w, b, gw, gb, groups)
    assert out.numel() > 2 ** 31
    rows = _end_rows(batch, 2)  # batch rows are independent: the reference convolves only these
    expected = diffusion.reference.conv1d_gn_mish(x[rows].double(), w.double(), b.double(), gw.double(),
                                                  gb.double(), groups)
    torch.testing.assert_close(out[rows], expected.float(), atol=1e-4, rtol=1e-4)


def test_kron_both_ends():
    # Past 2^31 outputs kron's kernel indexes in 64 bits; row 3 crosses 2^31, row 4 lies beyond it.
    _require_gib(12)
    A = torch.randn(5, 1, device="cuda", dtype=torch.bfloat16)
    B = torch.randn(1, 2 ** 29 + 8, device="cuda", dtype=torch.bfloat16)
    out = loader.linalg.kron(A, B)
    assert out.numel() > 2 ** 31
    for i in range(5):  # one product, rounded once: exact
        torch.testing.assert_close(out[i], (A[i].float() * B[0].float()).bfloat16(), atol=0, rtol=0)

