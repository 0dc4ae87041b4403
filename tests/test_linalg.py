"""Family `linalg` against its plain-PyTorch reference (and eigh), on every device present."""
import copy
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import loader
from conftest import DEVICES, TOLERANCES, check_dynamic_batch, needs_cuda, needs_graphs, needs_two_gpus, on_two_gpus

linalg = loader.load("linalg")
ref = linalg.reference
ops = linalg.ops


def random_spd(n, cond, batch=(), dtype=torch.float64, device="cpu", generator=None):
    """Q diag(lambda) Q^T with eigenvalues log-spaced from 1 down to 1/cond."""
    Q, _ = torch.linalg.qr(torch.randn(*batch, n, n, dtype=torch.float64, generator=generator))
    lam = torch.logspace(0, -math.log10(cond), n, dtype=torch.float64)
    A = (Q * lam) @ Q.mT
    return ((A + A.mT) / 2).to(dtype=dtype, device=device)


def rel_err(X, R):
    return (torch.linalg.matrix_norm(X.double() - R.double()) / torch.linalg.matrix_norm(R.double())).max().item()


# ---------------------------------------------------------------- matrix_inverse_root

@pytest.mark.parametrize("p", [1, 2, 4, 8])
@pytest.mark.parametrize("dtype,cond,bar", [(torch.float32, 1e3, 1e-3), (torch.float64, 1e8, 1e-6)])
def test_inverse_root_accuracy_bar(device, p, dtype, cond, bar):
    A = random_spd(48, cond, batch=(3,), dtype=dtype, device=device)
    X = linalg.matrix_inverse_root(A, p, 0.0, fallback="never")
    assert X.shape == A.shape and X.dtype == dtype
    assert rel_err(X, ref.matrix_inverse_root(A, p, 0.0)) <= bar


@pytest.mark.parametrize("n", [1, 2, 7, 100])
def test_inverse_root_sizes_and_eps(device, n):
    A = random_spd(n, 1e3, batch=(2, 2), device=device).float()
    X, residual = linalg.matrix_inverse_root(A, 4, 1e-3, fallback="never", return_residual=True)
    assert X.shape == (2, 2, n, n) and residual.shape == (2, 2)
    assert rel_err(X, ref.matrix_inverse_root(A, 4, 1e-3)) <= 1e-3
    assert (residual <= 5e-3 * math.sqrt(n)).all()


@pytest.mark.parametrize("n", [1024, 4096])
@needs_cuda
def test_inverse_root_large_cuda(n):
    A = random_spd(n, 1e3, device="cuda").float()
    X = linalg.matrix_inverse_root(A, 4, 0.0)
    assert rel_err(X, ref.matrix_inverse_root(A, 4, 0.0)) <= 1e-3
    A = random_spd(n, 1e8, device="cuda")
    assert rel_err(linalg.matrix_inverse_root(A, 4, 0.0), ref.matrix_inverse_root(A, 4, 0.0)) <= 1e-6


@needs_cuda
@pytest.mark.parametrize("p", [1, 2, 4, 8])
@pytest.mark.parametrize("n", [1, 7, 256, 258, 1024, 1500])
def test_inverse_root_bf16_pieces_cuda(n, p):
    """Float32 on CUDA multiplies through bfloat16 pieces (3 per factor, 6 piece products in one
    GEMM): the accuracy bar against float64 eigh, and float32-level accuracy (the CPU emulation
    gives 1e-5..4e-5, as exact float32 products do; 2 pieces per factor gave 4.5e-4).
    n = 7, 258: the split kernel's scalar path (n % 4 != 0); n = 1500: rows of 375 vectors."""
    A = random_spd(n, 1e3, batch=(2,), device="cuda").float()
    X, residual = linalg.matrix_inverse_root(A, p, 0.0, fallback="never", return_residual=True)
    err = rel_err(X, ref.matrix_inverse_root(A, p, 0.0))
    assert err <= 1e-3
    assert err <= 2e-4, f"bar met, but {err:.2e} is far above float32 products' ~3e-5"
    assert (residual <= 5e-3 * math.sqrt(n)).all()  # converged: "auto" would not fall back to eigh


@needs_cuda
def test_inverse_root_batched_cuda_ignores_tf32():
    A = random_spd(256, 1e3, batch=(64,), device="cuda").float()
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        X = linalg.matrix_inverse_root(A, 4, 0.0, fallback="never")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    assert rel_err(X, ref.matrix_inverse_root(A, 4, 0.0)) <= 1e-3


# n = 32 | 33: small_product's 4 x 1 | 8 x 2 tile; 48 | 49: its 16-byte | scalar A loads with rows clamped;
# 64 | 65: the small | general route; then a batch past 64 blocks per SM, and one matrix. 35: float64's
# 49000 bytes of buffers, under 48 KB alone and near it with the kernel's static shared memory (the opt-in's margin).
SMALL_ROUTE_CASES = [(32, (3,)), (33, (3,)), (35, (3,)), (48, (3,)), (49, (3,)), (64, (3,)), (65, (3,)), (3, (9000,)),
                     (5, ())]


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n,batch", SMALL_ROUTE_CASES)
def test_inverse_root_small_matrices_cuda(n, batch, dtype):
    """n <= 64 takes one kernel, a block per matrix (grid-stride past 64 blocks per SM: the batch of
    9000; n = 64 asks for more than 48 KB of shared memory, 160 KB in float64); n = 65 the general route.
    Each matches the reference. (No graph here, so tools/sanitize.sh runs it: the graph test is next.)"""
    A = random_spd(n, 1e3, batch=batch, dtype=dtype, device="cuda")
    X, residual = linalg.matrix_inverse_root(A, 4, 1e-6, fallback="never", return_residual=True)
    assert X.shape == A.shape and residual.shape == batch
    assert rel_err(X, ref.matrix_inverse_root(A, 4, 1e-6)) <= (1e-3 if dtype == torch.float32 else 1e-8)
    assert (residual <= (5e-3 if dtype == torch.float32 else 1e-9) * math.sqrt(n)).all()


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n,batch", SMALL_ROUTE_CASES)
def test_inverse_root_small_matrices_graph_cuda(n, batch, dtype):
    """Both routes replay from a CUDA graph: captured on one batch, replayed on another."""
    A = random_spd(n, 1e3, batch=batch, dtype=dtype, device="cuda")
    linalg.matrix_inverse_root(A, 4, 1e-6, fallback="never")  # warm-up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        X = linalg.matrix_inverse_root(A, 4, 1e-6, fallback="never")
    A.copy_(random_spd(n, 1e2, batch=batch, dtype=dtype, device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    assert rel_err(X, ref.matrix_inverse_root(A, 4, 1e-6)) <= (1e-3 if dtype == torch.float32 else 1e-8)


@pytest.mark.parametrize("n", [21, 32])
@pytest.mark.parametrize("dtype,bar", [(torch.float32, 3e-5), (torch.float64, 1e-11)])
def test_inverse_root_cpu_routes_agree(n, dtype, bar):
    """On the CPU one small matrix takes a thread of its own (linalg.h's inverse_root_small); a batch past
    that route's work limit (nb n^3 <= 32^3) takes the general route's batched products: the same answers."""
    A = random_spd(n, 1e3, dtype=dtype)
    alone, residual = linalg.matrix_inverse_root(A, 4, 1e-6, fallback="never", return_residual=True)
    copies = 32 ** 3 // n ** 3 + 1
    batch, residuals = linalg.matrix_inverse_root(torch.stack([A] + [2 * A] * (copies - 1)), 4, 1e-6,
                                                  fallback="never", return_residual=True)
    assert rel_err(alone, batch[0]) <= bar  # the rounding of other summation orders
    assert rel_err(alone, ref.matrix_inverse_root(A, 4, 1e-6)) <= (1e-3 if dtype == torch.float32 else 1e-8)
    assert residual.item() <= 1e-2 and residuals.max().item() <= 1e-2


def test_inverse_root_identity_is_exact(device):
    for dtype in (torch.float32, torch.float64):
        I = torch.eye(6, dtype=dtype, device=device).expand(3, 6, 6)
        for p in (1, 2, 4, 8):
            assert torch.equal(linalg.matrix_inverse_root(I, p, 0.0), I)
    D = torch.diag(torch.tensor([4.0, 16.0, 0.0], device=device))
    expected = torch.diag(torch.tensor([4.01, 16.01, 0.01], device=device) ** -0.5)
    torch.testing.assert_close(linalg.matrix_inverse_root(D, 2, 0.01), expected)


def test_inverse_root_diagonal_members_of_a_batch(device):
    # Only the matrices whose off-diagonal entries are all exactly 0 get the elementwise answer
    # (residual 0); one off-diagonal 1e-30 next to a diagonal of ~10 is not diagonal (it runs the
    # iteration: residual > 0); a NaN on the diagonal is reported, not turned into an answer.
    exact = torch.diag(torch.tensor([4.0, 16.0, 0.0, 9.0], dtype=torch.float64))
    full = random_spd(4, 1e2, dtype=torch.float64)
    nearly = torch.diag(torch.tensor([10.0, 11.0, 12.0, 13.0], dtype=torch.float64))
    nearly[0, 1] = nearly[1, 0] = 1e-30
    A = torch.stack([exact, full, nearly]).to(device)
    X, residual = linalg.matrix_inverse_root(A, 2, 0.01, fallback="never", return_residual=True)
    torch.testing.assert_close(X[0], torch.diag(torch.tensor([4.01, 16.01, 0.01, 9.01], dtype=torch.float64,
                                                             device=device) ** -0.5), rtol=1e-15, atol=0)
    assert residual[0].item() == 0 and residual[1].item() > 0 and residual[2].item() > 0
    torch.testing.assert_close(X[1:], ref.matrix_inverse_root(A[1:], 2, 0.01), rtol=1e-9, atol=1e-12)
    bad = torch.diag(torch.tensor([1.0, float("nan")], device=device))
    with pytest.raises(ValueError, match="NaN or Inf"):
        linalg.matrix_inverse_root(bad, 2, 0.01)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_inverse_root_diagonal_answer_is_the_same_on_both_routes(device, dtype):
    # linalg.h's diagonal_root, (max(d, 0) + eps)^(-1/p) in float64 rounded once to the dtype, whichever
    # route a matrix takes: ten of n = 8 the small one (one kernel on CUDA, a thread each on the CPU), the
    # same 80 entries as one n = 80 matrix the general one. Until session 39 the general route took the
    # power in the input's dtype.
    d = (torch.rand(80, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 10 - 1).to(dtype)
    small, small_residual = linalg.matrix_inverse_root(torch.diag_embed(d.view(10, 8)).to(device), 3, 0.01,
                                                       fallback="never", return_residual=True)
    large, large_residual = linalg.matrix_inverse_root(torch.diag(d).to(device), 3, 0.01, fallback="never",
                                                       return_residual=True)
    assert torch.equal(small.diagonal(dim1=-2, dim2=-1).flatten(), large.diagonal())
    assert torch.equal(large, torch.diag(large.diagonal()))
    assert (small_residual == 0).all() and large_residual.item() == 0
    expected = (d.double().clamp(min=0) + 0.01) ** (-1 / 3)  # some d below 0: max(d, 0)
    torch.testing.assert_close(large.diagonal().cpu().double(), expected, rtol=1e-15 if dtype == torch.float64 else 6e-8,
                               atol=0)


def test_inverse_root_singular_psd_uses_eps(device):
    B = torch.randn(32, 5, dtype=torch.float64)
    A = (B @ B.T).float().to(device)  # rank 5 of 32
    X = linalg.matrix_inverse_root(A, 4, 1e-2)
    assert torch.isfinite(X).all()
    assert rel_err(X, ref.matrix_inverse_root(A, 4, 1e-2)) <= 1e-3


def test_inverse_root_ill_conditioned_float32_no_worse_than_eigh(device):
    A = random_spd(64, 1e6, device=device).float()
    exact = ref.matrix_inverse_root(A, 4, 0.0)  # float64 eigh of the same float32 input
    ours = rel_err(linalg.matrix_inverse_root(A, 4, 0.0), exact)
    eigh = rel_err(ref.matrix_inverse_root_eigh(A, 4, 0.0), exact)
    assert ours <= max(eigh, 1e-4)


def test_inverse_root_auto_on_cpu_takes_one_large_matrix_to_eigh(monkeypatch):
    """CPU "auto": one float64 matrix of n >= 64 goes to eigh (faster there), with the op's own argument checks
    and NaN check; float32 below n = 128 (one or a batch), smaller matrices and inputs that need a gradient stay
    on the iteration (float32 n = 64 went to eigh until session 47: test_inverse_root_auto_cpu_route_by_dtype)."""
    routes = []
    monkeypatch.setattr(linalg.module, "_eigh_inverse_root",
                        lambda A, p, eps: routes.append(tuple(A.shape)) or ref.matrix_inverse_root(A, p, eps))
    A = random_spd(64, 1e3)
    X, residual = linalg.matrix_inverse_root(A, 4, 1e-6, return_residual=True)
    assert routes == [(64, 64)] and residual.item() == 0
    assert rel_err(X, ref.matrix_inverse_root(A, 4, 1e-6)) <= 1e-10
    linalg.matrix_inverse_root(random_spd(48, 1e3), 4)
    linalg.matrix_inverse_root(random_spd(64, 1e3, batch=(2,), dtype=torch.float32), 4)
    linalg.matrix_inverse_root(random_spd(120, 1e3, dtype=torch.float32), 4)
    I = torch.eye(64, dtype=torch.float64, requires_grad=True)  # equal eigenvalues: eigh's backward is NaN
    linalg.matrix_inverse_root(I, 2, 0.5).sum().backward()
    assert routes == [(64, 64)] and torch.isfinite(I.grad).all()
    with pytest.raises(ValueError, match="A must be square"):
        linalg.matrix_inverse_root(torch.ones(64, 70), 4)
    with pytest.raises(ValueError, match="p must be"):
        linalg.matrix_inverse_root(A, 0)
    with pytest.raises(ValueError, match="NaN or Inf"):
        linalg.matrix_inverse_root(torch.diag(torch.full((64,), float("nan"))), 4)
    assert routes == [(64, 64)]
    # A batch of n >= 128 too: the iteration took 1.5-3.4x eigh's time there in float32, 5-6.5x in float64
    # (one thread; session 45's CPU review). Until then batches always stayed on the iteration.
    B = random_spd(128, 1e3, batch=(2,), dtype=torch.float32)
    X, residual = linalg.matrix_inverse_root(B, 4, 1e-6, return_residual=True)
    assert routes == [(64, 64), (2, 128, 128)] and torch.equal(residual, torch.zeros(2))
    assert rel_err(X, ref.matrix_inverse_root(B.double(), 4, 1e-6)) <= 1e-5


def test_inverse_root_fallback_recomputes_unconverged(device):
    A = random_spd(64, 1e5, batch=(2,), device=device).float()
    # max_cond=2: the step count is far too small for cond 1e5, so the residual flags it
    X, residual = linalg.matrix_inverse_root(A, 4, 0.0, max_cond=2, fallback="never", return_residual=True)
    assert (residual > 5e-3 * 8).all()
    X = linalg.matrix_inverse_root(A, 4, 0.0, max_cond=2, fallback="auto")
    assert rel_err(X, ref.matrix_inverse_root(A, 4, 0.0)) <= 1e-2


def test_inverse_root_schedule_memo_keeps_each_max_cond_apart(device):
    # The step schedule is remembered per (p, max_cond, dtype), at most 64 of them: after 70 other
    # max_cond values (the memo cleared on the way) each result is the same as the first time, and a
    # schedule built for cond 2 still leaves cond 1e5 unconverged (no other key's schedule is used).
    A = random_spd(24, 1e5, dtype=torch.float64, device=device)
    first = {c: linalg.matrix_inverse_root(A, 4, 0.0, max_cond=c, fallback="never", return_residual=True)
             for c in (2.0, 1e12)}
    for c in range(3, 73):
        linalg.matrix_inverse_root(A, 4, 0.0, max_cond=float(c), fallback="never")
    for c, (X, residual) in first.items():
        X_again, residual_again = linalg.matrix_inverse_root(A, 4, 0.0, max_cond=c, fallback="never",
                                                             return_residual=True)
        assert torch.equal(X, X_again) and torch.equal(residual, residual_again)
    assert first[2.0][1].item() > 1e-2 > 1e-8 > first[1e12][1].item()


def test_inverse_root_sanitize_prefill_changes_nothing(device):
    # JITKERNELS_SANITIZE_PREFILL=1 (set by tools/sanitize.sh for initcheck) puts every product into a
    # zero-filled output first: the same bits come out, and the fills really happen (aten::zeros calls).
    # n = 80: the products of the general route (on CUDA, n <= 64 takes one kernel without them).
    # Under sanitize.sh's initcheck the unfilled half would draw the very reports the switch is for
    # (session 12: 8704 reports, all from this test's unfilled process, none from the filled runs).
    if os.environ.get("JITKERNELS_SANITIZE_PREFILL") == "1":
        pytest.skip("runs the unfilled path on purpose; the normal suite checks it")
    code = textwrap.dedent(f"""
        import torch, loader
        torch.manual_seed(0)
        A = torch.randn(3, 80, 80, dtype=torch.float32)
        A = (A @ A.mT / 80 + torch.eye(80)).to("{device}")
        f = loader.linalg
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            X = f.matrix_inverse_root(A, 4, 1e-6, fallback="never")
        zeros = sum(e.count for e in prof.key_averages() if e.key == "aten::zeros")
        print(X.double().sum().item().hex(), X.double().abs().sum().item().hex(), zeros)
        """)
    runs = {}
    for flag in ("0", "1"):
        env = {**os.environ, "JITKERNELS_SANITIZE_PREFILL": flag}
        out = subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(os.path.dirname(__file__)), env=env,
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        runs[flag] = out.stdout.split()
    assert runs["0"][:2] == runs["1"][:2]
    assert int(runs["1"][2]) >= int(runs["0"][2]) + 20  # p = 4: 28 products


def test_inverse_root_bad_input(device):
    A = random_spd(4, 10, device=device)
    with pytest.raises((RuntimeError, ValueError), match="A must be square"):
        linalg.matrix_inverse_root(A[:, :3])
    with pytest.raises((RuntimeError, ValueError), match="A must be"):
        linalg.matrix_inverse_root(A[0])
    with pytest.raises((RuntimeError, ValueError), match="A must be float32 or float64"):
        linalg.matrix_inverse_root(A.half())
    with pytest.raises((RuntimeError, ValueError), match="p must be"):
        linalg.matrix_inverse_root(A, 0)
    with pytest.raises((RuntimeError, ValueError), match="eps must be"):
        linalg.matrix_inverse_root(A, 4, -1.0)
    with pytest.raises((RuntimeError, ValueError), match="max_cond must be"):
        linalg.matrix_inverse_root(A, 4, 0.0, max_cond=0.5)
    bad = A.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match="A contains NaN or Inf"):
        linalg.matrix_inverse_root(bad)
    bad[1, 2] = float("inf")
    with pytest.raises(ValueError, match="A contains NaN or Inf"):
        linalg.matrix_inverse_root(bad)
    assert torch.isnan(linalg.matrix_inverse_root(bad, fallback="never")).all()


@pytest.mark.parametrize("dtype,scale,eps", [(torch.float32, 1e20, 1e-6), (torch.float32, 1e-30, 0.0),
                                               (torch.float64, 1e160, 1e-6), (torch.float64, 1e-170, 0.0)])


def test_inverse_root_of_huge_or_tiny_entries(device, dtype, scale, eps):
    """The scaling norm of huge (or tiny) entries: the squares overflowed (X came out zero) or underflowed
    (NaN) while the matrix itself, cond 100, is easy. fallback="never": no eigh to hide it."""
    A = (random_spd(6, 100) * scale).to(dtype=dtype, device=device)
    X = linalg.matrix_inverse_root(A, 4, eps, fallback="never")
    assert rel_err(X, linalg.reference.matrix_inverse_root(A, 4, eps)) < (1e-3 if dtype == torch.float32 else 1e-8)


@pytest.mark.parametrize("n", [1, 3, 32])
def test_inverse_root_of_overflowing_entries_is_nan_or_an_error(device, n):
    """As documented: float32 entries above half the largest overflow in A + Aᵀ: NaN with fallback="never"; "auto"
    and "always", which check on the host, raise (they returned NaN in silence until session 52). On the CPU's eigh
    routes an all-inf matrix raised LAPACK's "failed to converge" (n = 3..16), and n = 1 gave 0."""
    A = torch.full((n, n), 2e38, device=device)
    assert torch.isnan(linalg.matrix_inverse_root(A, fallback="never")).all()
    batch = torch.stack([A, torch.eye(n, device=device)])  # only the overflowing matrix is NaN
    X = linalg.matrix_inverse_root(batch, 4, 0.0, fallback="never")
    assert torch.isnan(X[0]).all()
    torch.testing.assert_close(X[1], torch.eye(n, device=device))
    for fallback in ("auto", "always"):
        for a in (A, batch):
            with pytest.raises(ValueError, match="overflow its dtype in A"):
                linalg.matrix_inverse_root(a, 4, 0.0, fallback=fallback)


@pytest.mark.parametrize("fallback", ["auto", "always"])
def test_inverse_root_of_a_singular_matrix_without_eps_is_an_error(device, fallback):
    """eps = 0 and a singular A: no inverse root. The eigh routes returned inf and NaN in silence (session 52's
    review: [inf, nan, -inf], and [[inf, 0], [0, inf]] for zeros); "auto" recomputes there with eigh."""
    v = torch.tensor([1.0, 2.0, 2.0], dtype=torch.float64, device=device)
    for A in (torch.outer(v, v), torch.zeros(2, 2, dtype=torch.float64, device=device)):
        with pytest.raises(ValueError, match="A \\+ eps I is singular"):
            linalg.matrix_inverse_root(A, 4, 0.0, fallback=fallback)
    torch.testing.assert_close(linalg.matrix_inverse_root(torch.outer(v, v), 2, 1e-3, fallback=fallback),
                               linalg.reference.matrix_inverse_root(torch.outer(v, v), 2, 1e-3))


def test_inverse_root_uses_the_symmetric_part(device):
    """As the reference and the eigh fallback do: every route gives the root of (A + A^T) / 2."""
    A = torch.tensor([[2.0, 1.0], [0.0, 3.0]], dtype=torch.float64, device=device)
    expected = linalg.reference.matrix_inverse_root(A, 2, 0.0)
    for fallback in ("never", "auto", "always"):
        torch.testing.assert_close(linalg.matrix_inverse_root(A, 2, 0.0, fallback=fallback), expected)


def test_inverse_root_gradcheck(device):
    A = random_spd(5, 10, device=device).requires_grad_()
    assert torch.autograd.gradcheck(lambda a: linalg.matrix_inverse_root(a, 4, 1e-3), (A,))
    assert torch.autograd.gradcheck(lambda a: linalg.matrix_inverse_root(a, 2, 0.0, fallback="never"), (A,))


@pytest.mark.parametrize("eigenvalues,eps,kwargs", [
    ([2.0, 2.0, 2.0, 2.0, 3.0], 1e-3, {"fallback": "always"}),  # repeated: eigh's own backward was off by 2
    ([1.0, 1.0, 1.0, 1.0, 1.0], 1e-3, {"fallback": "always"}),  # A = I: it was NaN
    ([1.0, 0.5, 0.3, -2e-2, -1e-2], 1e-3, {"fallback": "always"}),  # below -eps: clamped at 0, a flat root there
    ([1.0, 1.0, 1.0, 1e-3, 1e-3], 1e-9, {"max_cond": 1e3}),  # "auto" recomputes it with eigh: it was 3.2 off
])
def test_inverse_root_gradient_on_the_eigh_routes(device, eigenvalues, eps, kwargs):
    """The eigh routes took eigh's own backward, wrong where eigenvalues repeat (session 52's review); they now
    share the op's Daleckii-Krein backward, with the clamp at 0 they apply in forward."""
    gen = torch.Generator().manual_seed(1)
    Q, _ = torch.linalg.qr(torch.randn(5, 5, dtype=torch.float64, generator=gen))
    A = ((Q * torch.tensor(eigenvalues, dtype=torch.float64)) @ Q.T).to(device).requires_grad_()
    if "max_cond" in kwargs:  # the case is the recompute's
        _, residual = linalg.matrix_inverse_root(A, 4, eps, return_residual=True, fallback="never", **kwargs)
        assert residual > 1e-6
    assert torch.autograd.gradcheck(lambda a: linalg.matrix_inverse_root(a, 4, eps, **kwargs), (A,))


def test_inverse_root_residual_carries_no_gradient(device):
    """The residual is a diagnostic the backward has no formula for: it used to require grad on the
    iteration's routes, and a loss on it gave A a gradient of zeros in silence (session 45's derivative
    review). Like the eigh route's, it is now a constant for autograd, and X's gradient is unchanged."""
    A = random_spd(4, 8, device=device).requires_grad_()
    (expected,) = torch.autograd.grad(linalg.matrix_inverse_root(A, 4, 1e-3).sum(), A)
    for fallback in ("never", "auto", "always"):
        X, residual = linalg.matrix_inverse_root(A, 4, 1e-3, max_cond=10.0, fallback=fallback, return_residual=True)
        assert not residual.requires_grad, fallback
        (got,) = torch.autograd.grad(X.sum() + residual.sum(), A)
        torch.testing.assert_close(got, expected)
    X, residual = torch.func.vmap(lambda a: linalg.matrix_inverse_root(a, 4, 1e-3, fallback="never",
                                                                       return_residual=True))(A.detach()[None])
    torch.testing.assert_close(torch.func.grad(lambda a: linalg.matrix_inverse_root(
        a, 4, 1e-3, fallback="never", return_residual=True)[0].sum())(A.detach()), expected)


@pytest.mark.parametrize("n,spread", [(6, 1e-7), (6, 1e-5), (40, 1e-3), (40, 0.1)])
def test_inverse_root_float32_gradient_of_close_eigenvalues(device, n, spread):
    """The backward's divided differences (f_i - f_j) / (l_i - l_j) were formed from rounded f values: for
    float32 matrices with eigenvalues close together but not within 1e-9 of each other (I + a small PSD part)
    the cancellation left gradients off by 8e-5 (spread 0.1) to 24% (1e-7) of their largest entry. The input
    is the float32 matrix itself; the oracle, autograd of the float64 reference on it."""
    gen = torch.Generator().manual_seed(n)
    Q = torch.randn(n, n, dtype=torch.float64, generator=gen)
    A = (torch.eye(n, dtype=torch.float64) + spread * (Q @ Q.T) / (Q @ Q.T).norm()).float().to(device)
    G = torch.randn(n, n, generator=gen).to(device)
    A32 = A.clone().requires_grad_()
    (ours,) = torch.autograd.grad(linalg.matrix_inverse_root(A32, 4, 1e-6), A32, G)
    A64 = A.double().requires_grad_()
    (exact,) = torch.autograd.grad(ref.matrix_inverse_root(A64, 4, 1e-6), A64, G.double())
    assert ((ours.double() - exact).abs().max() / exact.abs().max()).item() < 2e-5


@pytest.mark.parametrize("n,batch", [(5, ()), (5, (3,)), (40, (2,))])  # the small CPU route and the general one
def test_inverse_root_outputs_take_in_place_ops_with_a_gradient(device, n, batch):
    """The root and the residual are new tensors, as the schema says: with a gradient to record, they came back
    as autograd views of the kernel's (nb, n, n) and (nb,) buffers, so `X /= 4` or `X.diagonal().add_(1)` raised
    "Output 0 of matrix_inverse_root_backward is a view and is being modified inplace" (without a gradient, and
    on the eigh route, they worked)."""
    A = random_spd(n, 10, batch=batch, device=device).requires_grad_()
    X, residual = linalg.matrix_inverse_root(A, 4, 1e-6, fallback="never", return_residual=True)
    assert not X._is_view() and not residual._is_view()
    X.mul_(2)
    residual.add_(1)
    (ours,) = torch.autograd.grad(X.sum(), A)
    (expected,) = torch.autograd.grad(2 * linalg.matrix_inverse_root(A, 4, 1e-6, fallback="never").sum(), A)
    torch.testing.assert_close(ours, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype,eigenvalues,eps", [(torch.float32, (1e3, 10.0, 1.0, 1e-9), 1e-6),
                                                   (torch.float64, (1e8, 10.0, 1.0, 1e-9), 1e-9)])


def test_inverse_root_gradient_of_widely_spread_eigenvalues(device, dtype, eigenvalues, eps):
    """The backward formed f_i - f_j as f_j expm1(-log1p((l_i - l_j) / (l_j + eps)) / p): where
    (l_i + eps) / (l_j + eps) is below the dtype's eps, 1 + (l_i - l_j) / (l_j + eps) rounds to 0, log1p gives
    -inf and the whole gradient NaN (float32 diag(1e3, 10, 1, 1e-9) with eps = 1e-6, a rank-deficient
    statistic's condition). The oracle, autograd of the float64 reference on the same matrix."""
    A = torch.diag(torch.tensor(eigenvalues, dtype=torch.float64))
    G = torch.randn(4, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    A64 = A.clone().requires_grad_()
    (exact,) = torch.autograd.grad(ref.matrix_inverse_root(A64, 4, eps), A64, G)
    A_ = A.to(dtype=dtype, device=device).requires_grad_()
    (ours,) = torch.autograd.grad(linalg.matrix_inverse_root(A_, 4, eps, fallback="never"), A_, G.to(dtype).to(device))
    assert ((ours.double().cpu() - exact).abs().max() / exact.abs().max()).item() < 1e-5


def test_inverse_root_gradient_of_small_distinct_eigenvalues(device):
    """The backward took eigenvalues within 1e-9 of the *largest* one for equal: a float64 covariance with
    eigenvalues (1, 1e-3, 1e-10, 1e-11) (whitening, p = 2) had its 1e-10 and 1e-11 treated as one, with f' in
    place of their divided difference: the gradient was 32% off. Equal now means within 1e-9 of the pair."""
    gen = torch.Generator().manual_seed(0)
    Q, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64, generator=gen))
    A = (Q * torch.tensor([1.0, 1e-3, 1e-10, 1e-11], dtype=torch.float64)) @ Q.T
    A = ((A + A.T) / 2).to(device)
    G = torch.randn(4, 4, dtype=torch.float64, generator=gen).to(device)
    A64 = A.clone().requires_grad_()
    (exact,) = torch.autograd.grad(ref.matrix_inverse_root(A64, 2, 1e-12), A64, G)
    for fallback in ("never", "auto"):
        A_ = A.clone().requires_grad_()
        (ours,) = torch.autograd.grad(linalg.matrix_inverse_root(A_, 2, 1e-12, fallback=fallback), A_, G)
        assert ((ours - exact).abs().max() / exact.abs().max()).item() < 1e-6


def test_inverse_root_opcheck(device):
    A = random_spd(6, 10, batch=(2,), device=device).float()
    torch.library.opcheck(ops.matrix_inverse_root.default, (A, 4, 1e-6, 0.0))


def test_inverse_root_empty(device):
    X, r = ops.matrix_inverse_root(torch.empty(0, 3, 3, device=device), 4, 0.0, 0.0)
    assert X.shape == (0, 3, 3) and r.shape == (0,)


@pytest.mark.parametrize("shape", [(0, 3, 3), (2, 0, 0), (0, 0)])
def test_inverse_root_empty_backward(device, shape):
    """Empty input has an empty gradient, on the op's route as on eigh's and the reference's: the backward's
    amax over no eigenvalues (matrices of n = 0) raised IndexError."""
    A = torch.zeros(shape, dtype=torch.float64, device=device, requires_grad=True)
    for fallback in ("never", "auto", "always"):
        (grad,) = torch.autograd.grad(linalg.matrix_inverse_root(A, 2, fallback=fallback).sum(), A)
        assert grad.shape == A.shape


# ---------------------------------------------------------------- kron

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shapes", [((3, 4), (5, 6)), ((5, 5), (10, 10)), ((2, 3), (1, 7)), ((1, 1), (3, 3))])
def test_kron_matches_torch(device, dtype, shapes):
    A = torch.randn(*shapes[0], dtype=dtype, device=device)
    B = torch.randn(*shapes[1], dtype=dtype, device=device)
    atol, rtol = TOLERANCES[dtype]
    torch.testing.assert_close(linalg.kron(A, B), torch.kron(A, B), atol=atol, rtol=rtol)


def test_kron_batched(device):
    A = torch.randn(2, 3, 4, 5, device=device)
    B = torch.randn(2, 3, 6, 8, device=device)
    out = linalg.kron(A, B)
    assert out.shape == (2, 3, 24, 40)
    torch.testing.assert_close(out, ref.kron(A, B))
    torch.testing.assert_close(out[1, 2], torch.kron(A[1, 2], B[1, 2]))
    # non-contiguous inputs
    torch.testing.assert_close(linalg.kron(A.mT, B), ref.kron(A.mT, B))


def test_kron_grad_and_opcheck(device):
    A = torch.randn(2, 3, 4, dtype=torch.float64, device=device, requires_grad=True)
    B = torch.randn(2, 2, 5, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(linalg.kron, (A, B))
    torch.library.opcheck(ops.kron.default, (A.detach().float(), B.detach().float()))


def test_kron_bad_input(device):
    A = torch.randn(3, 4, device=device)
    with pytest.raises((RuntimeError, ValueError), match="B must have the same batch dims"):
        linalg.kron(A, torch.randn(2, 3, 4, device=device))
    with pytest.raises((RuntimeError, ValueError), match="A must be a matrix"):
        linalg.kron(torch.randn(3, device=device), torch.randn(3, device=device))
    with pytest.raises((RuntimeError, ValueError), match="B has dtype"):
        linalg.kron(A, A.double())
    with pytest.raises((RuntimeError, ValueError), match="A must be float"):
        linalg.kron(A.long(), A.long())


# ---------------------------------------------------------------- per-sample gradients

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("with_bias", [True, False])
def test_per_sample_grad_linear_matches_einsum(device, dtype, with_bias):
    x = torch.randn(6, 13, dtype=dtype, device=device)
    g = torch.randn(6, 8, dtype=dtype, device=device)
    gw, gb = linalg.per_sample_grad_linear(x, g, with_bias)
    rw, rb = ref.per_sample_grad_linear(x, g, with_bias)
    atol, rtol = TOLERANCES[dtype]
    torch.testing.assert_close(gw, rw, atol=atol, rtol=rtol)
    if with_bias:
        torch.testing.assert_close(gb, rb)
    else:
        assert gb is None


def test_per_sample_grad_linear_grad_opcheck_and_errors(device):
    x = torch.randn(4, 5, dtype=torch.float64, device=device, requires_grad=True)
    g = torch.randn(4, 3, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: linalg.per_sample_grad_linear(a, b), (x, g))
    torch.library.opcheck(ops.per_sample_grad_linear.default, (x.detach(), g.detach(), True))
    torch.library.opcheck(ops.per_sample_grad_linear.default, (x.detach(), g.detach(), False))
    with pytest.raises((RuntimeError, ValueError), match="grad_out has batch size"):
        linalg.per_sample_grad_linear(x.detach(), g.detach()[:3])
    with pytest.raises((RuntimeError, ValueError), match="x must be 2-D"):
        linalg.per_sample_grad_linear(x.detach()[0], g.detach())


def _mlp(device):
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 7, bias=False), nn.ReLU(), nn.Linear(7, 3)).to(
        device, torch.float64)


@pytest.mark.parametrize("loss", ["mse", "ce"])
def test_per_sample_grads_mlp_matches_loop(device, loss):
    model = _mlp(device)
    x = torch.randn(6, 5, dtype=torch.float64, device=device)
    if loss == "mse":
        loss_fn, y = nn.functional.mse_loss, torch.randn(6, 3, dtype=torch.float64, device=device)
    else:
        loss_fn, y = nn.functional.cross_entropy, torch.randint(0, 3, (6,), device=device)
    ours = linalg.per_sample_grads(model, loss_fn, x, y)
    expected = ref.per_sample_grads(model, loss_fn, x, y)
    assert list(ours) == list(expected)
    for name in expected:
        torch.testing.assert_close(ours[name], expected[name])
    assert all(p.grad is None for p in model.parameters())  # .grad left alone


def test_per_sample_grads_under_inference_mode(device):
    """Under torch.inference_mode the Linear route's autograd cannot run (every tensor made there is an inference
    tensor); it raised "Inference tensors do not track version counter" until session 45, and routing every
    parameter to torch.func instead gave zeros on torch 2.11 (its first fix, on the H200 in call 3). It now runs
    outside inference mode, on normal copies of inputs made inside it."""
    model = _mlp(device)
    x = torch.randn(6, 5, dtype=torch.float64, device=device)
    y = torch.randn(6, 3, dtype=torch.float64, device=device)
    expected = ref.per_sample_grads(model, nn.functional.mse_loss, x, y)
    with torch.inference_mode():
        results = [linalg.per_sample_grads(model, nn.functional.mse_loss, x, y),
                   linalg.per_sample_grads(model, nn.functional.mse_loss, x.clone(), y.clone())]  # inference tensors
    for ours in results:
        assert list(ours) == list(expected)
        for name in expected:
            torch.testing.assert_close(ours[name], expected[name])


def test_per_sample_grads_under_autocast_have_the_parameters_dtypes(device):
    """Under torch.autocast a Linear after another layer sees a 16-bit input and output gradient, and its
    per-sample gradients came out in that 16-bit dtype until session 45, beside float32 ones for the first
    Linear and torch.func's parameters (p.grad and the reference give the parameter's dtype)."""
    model = _mlp(device).float()
    x = torch.randn(6, 5, device=device)
    y = torch.randn(6, 3, device=device)
    with torch.autocast(device, dtype=torch.bfloat16):
        expected = ref.per_sample_grads(model, nn.functional.mse_loss, x, y)
        ours = linalg.per_sample_grads(model, nn.functional.mse_loss, x, y)
    assert list(ours) == list(expected)
    for name, p in model.named_parameters():
        assert ours[name].dtype == p.dtype, name
        torch.testing.assert_close(ours[name], expected[name], atol=2e-2, rtol=2e-2)


def test_per_sample_grads_mixed_model_uses_func(device):
    model = nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6), nn.GELU(), nn.Linear(6, 2)).to(device, torch.float64)
    x = torch.randn(5, 4, dtype=torch.float64, device=device)
    y = torch.randn(5, 2, dtype=torch.float64, device=device)
    ours = linalg.per_sample_grads(model, nn.functional.mse_loss, x, y)
    expected = ref.per_sample_grads(model, nn.functional.mse_loss, x, y)
    for name in expected:
        torch.testing.assert_close(ours[name], expected[name])


class _TiedHead(nn.Module):
    """GPT-style tying: the output Linear's weight is also the embedding's."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 10, bias=False)
        self.emb = nn.Embedding(10, 4)
        self.emb.weight = self.head.weight

    def forward(self, i):
        return self.head(torch.tanh(self.emb(i)))


class _WeightReadInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) + x * self.lin.weight[:, 0]


class _TokensFlattened(nn.Module):
    """A Linear over (B * T, in): its rows are tokens, not samples."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x):
        return self.lin(x.reshape(-1, 3)).reshape(x.shape[0], -1)


class _LinearOfAParameter(nn.Module):
    """A Linear applied to a parameter with one row per sample (B = 5): every sample uses every row."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.keys = nn.Parameter(torch.randn(5, 3))

    def forward(self, x):
        return x @ self.lin(self.keys).mT


def _per_sample_cases(device):
    f64 = dict(dtype=torch.float64, device=device)
    return {
        "inplace_relu": (nn.Sequential(nn.Linear(3, 4), nn.ReLU(inplace=True), nn.Linear(4, 1)).to(**f64),
                         nn.functional.mse_loss, torch.randn(5, 3, **f64), torch.randn(5, 1, **f64)),
        "inplace_hardtanh": (nn.Sequential(nn.Linear(3, 4), nn.Hardtanh(inplace=True), nn.Linear(4, 1)).to(**f64),
                             nn.functional.mse_loss, torch.randn(5, 3, **f64), torch.randn(5, 1, **f64)),
        "tied": (_TiedHead().to(**f64), nn.functional.cross_entropy, torch.randint(0, 10, (5,), device=device),
                 torch.randint(0, 10, (5,), device=device)),
        "read_in_forward": (_WeightReadInForward().to(**f64), nn.functional.mse_loss, torch.randn(5, 3, **f64),
                            torch.randn(5, 3, **f64)),
        "tokens_flattened": (_TokensFlattened().to(**f64), nn.functional.mse_loss, torch.randn(5, 4, 3, **f64),
                             torch.randn(5, 8, **f64)),
        "linear_of_a_parameter": (_LinearOfAParameter().to(**f64), nn.functional.mse_loss, torch.randn(5, 3, **f64),
                                  torch.randn(5, 5, **f64)),
    }


@pytest.mark.parametrize("case", ["inplace_relu", "inplace_hardtanh", "tied", "read_in_forward", "tokens_flattened",
                                  "linear_of_a_parameter"])


def test_per_sample_grads_of_linears_whose_tensors_are_used_elsewhere(device, case):
    """An in-place activation after a Linear changed the output kept for its gradient (3.6 off); a weight
    tied to an embedding or read in forward lost its other terms (0.55 / 1.9 off): session 40's review.
    A Linear whose rows are not the samples' own (tokens flattened to (B * T, in), a parameter) gave
    (B * T, ...) gradients, or silently wrong ones (19 off), until session 42."""
    model, loss_fn, x, y = _per_sample_cases(device)[case]
    ours = linalg.per_sample_grads(model, loss_fn, x, y)
    expected = ref.per_sample_grads(model, loss_fn, x, y)
    assert list(ours) == list(expected)
    for name in expected:
        torch.testing.assert_close(ours[name], expected[name])


class _AttentionOnly(nn.Module):
    """MultiheadAttention reads its out_proj's (an nn.Linear's) parameters without calling its forward."""

    def __init__(self):
        super().__init__()
        self.attention = nn.MultiheadAttention(4, 2, batch_first=True)

    def forward(self, x):
        return self.attention(x, x, x)[0].sum(1)


class _UnusedHead(nn.Module):
    """A Linear this forward never reaches, beside a parameter it does."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(3))
        self.head = nn.Linear(3, 3)

    def forward(self, x):
        return x * self.scale


class _FunctionalLinear(nn.Module):
    """A Linear's parameters used through nn.functional.linear."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return nn.functional.linear(x, self.lin.weight, self.lin.bias)


class _LinearCalledWithKeyword(nn.Module):
    """A Linear called as lin(input=x): its forward hook sees no positional argument."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(input=x)


@pytest.mark.parametrize("model", [_AttentionOnly, _UnusedHead, _FunctionalLinear, _LinearCalledWithKeyword])
def test_per_sample_grads_of_linears_not_called_plainly(device, model):
    """A model with nn.Linear modules none of whose forwards ran (MultiheadAttention's out_proj, an unused
    head, a Linear's weight passed to nn.functional.linear) raised "`inputs` argument to `grad()` cannot be
    empty" until session 43: those parameters now go to torch.func (zeros where unused), as the others do. A
    Linear called with its input as a keyword (lin(input=x)) raised IndexError in the hook until then."""
    f64 = dict(dtype=torch.float64, device=device)
    x = torch.randn(5, 3, 4, **f64) if model is _AttentionOnly else torch.randn(5, 3, **f64)
    y = torch.randn(5, 4 if model is _AttentionOnly else 3, **f64)
    net = model().to(**f64)
    ours = linalg.per_sample_grads(net, nn.functional.mse_loss, x, y)
    expected = ref.per_sample_grads(net, nn.functional.mse_loss, x, y)
    assert list(ours) == list(expected)
    for name in expected:
        torch.testing.assert_close(ours[name], expected[name])


@pytest.mark.parametrize("structure", ["tuple", "dict"])
def test_per_sample_grads_of_a_model_returning_a_tuple_or_dict(device, structure):
    """loss_fn gets what the model returns: a model with a Linear returning (logits, aux) or {"y": ...} raised
    AttributeError "'tuple' object has no attribute 'unsqueeze'" (a model without a Linear, on torch.func alone,
    worked)."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.scale = nn.Linear(5, 3), nn.Parameter(torch.randn(3))

        def forward(self, x):
            y = self.lin(x)
            return (y, y * self.scale) if structure == "tuple" else {"y": y, "z": y * self.scale}

    def loss_fn(out, t):
        y, z = out if structure == "tuple" else (out["y"], out["z"])
        return ((y - t) ** 2).mean() + (z ** 2).mean()

    torch.manual_seed(0)
    model = Model().to(device)
    x, t = torch.randn(6, 5, device=device), torch.randn(6, 3, device=device)
    got, expected = linalg.per_sample_grads(model, loss_fn, x, t), ref.per_sample_grads(model, loss_fn, x, t)
    assert got.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name])


def assert_per_sample_grads_match_the_reference(model, device):
    """per_sample_grads of `model` (inputs of 5, outputs of 3, a batch of 6) against reference.py's loop."""
    x, t = torch.randn(6, 5, device=device), torch.randn(6, 3, device=device)
    loss_fn = nn.functional.mse_loss
    got, expected = linalg.per_sample_grads(model, loss_fn, x, t), ref.per_sample_grads(model, loss_fn, x, t)
    for name in expected:
        torch.testing.assert_close(got[name], expected[name])


def test_per_sample_grads_of_a_linear_subclass_with_its_own_forward(device):
    """A subclass of nn.Linear whose forward transforms its weight and bias (StyleGAN's equalized learning rate;
    QAT's fake-quantized weight) was taken for a plain Linear: its gradients came from the outer products,
    off by the transform (here 1/c and 2x, silently). Such modules go through torch.func."""
    class EqualLinear(nn.Linear):
        def forward(self, x):
            return nn.functional.linear(x, self.weight * 5 ** -0.5, self.bias * 0.5)

    torch.manual_seed(0)
    model = nn.Sequential(EqualLinear(5, 4), nn.Tanh(), nn.Linear(4, 3)).to(device)
    assert_per_sample_grads_match_the_reference(model, device)


def test_per_sample_grads_of_a_linear_whose_output_a_forward_hook_changes(device):
    """The forward hook that records a Linear's output ran after the user's own forward hooks, so it saw an
    output a hook had already changed (o * 2: activation steering, scaling) and took the gradient there: the
    Linear's per-sample gradients came out halved, silently. It now runs first, on the Linear's own output."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3)).to(device)
    model[0].register_forward_hook(lambda mod, args, out: out * 2)
    assert_per_sample_grads_match_the_reference(model, device)


class _StopGradientBranch(nn.Module):
    """A Linear called under torch.no_grad inside forward (a target or stop-gradient branch), and the same
    Linear called again with gradients."""
    def __init__(self):
        super().__init__()
        self.frozen_branch, self.out = nn.Linear(5, 3), nn.Linear(5, 3)

    def forward(self, x):
        with torch.no_grad():
            target = self.frozen_branch(x) + self.out(x)
        return self.out(x) + self.frozen_branch(x) * 0.5 + target


def test_per_sample_grads_of_linears_called_under_no_grad_in_forward(device):
    """Such a call's output requires no grad, and per_sample_grads passed it to torch.autograd.grad, which raised
    "One of the differentiated Tensors does not require grad" (session 52's review). Its gradient is 0: only the
    calls with gradients count."""
    torch.manual_seed(0)
    assert_per_sample_grads_match_the_reference(_StopGradientBranch().to(device), device)


def test_per_sample_grads_under_no_grad(device):
    """Called under torch.no_grad (an evaluation or data-attribution loop), a model with a Linear raised
    AttributeError "'NoneType' object has no attribute 'next_functions'": the check for a parameter used outside
    its Linear's calls took a view's grad_fn, which no_grad leaves None. Everything else ran under enable_grad."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 4), nn.LayerNorm(4), nn.Linear(4, 3)).to(device)
    x, t = torch.randn(6, 5, device=device), torch.randn(6, 3, device=device)
    loss_fn = nn.functional.mse_loss
    expected = ref.per_sample_grads(model, loss_fn, x, t)
    with torch.no_grad():
        got = linalg.per_sample_grads(model, loss_fn, x, t)
    for name in expected:
        torch.testing.assert_close(got[name], expected[name])


def test_per_sample_grads_of_a_compiled_model(device):
    """A torch.compile'd model (or submodule) runs its Linears inside one compiled autograd function: the outputs
    the hooks record are not on the path from the loss, so their gradients were None and every Linear's
    per-sample gradient came out 0, silently. Such Linears now go through torch.func (which runs the compiled
    module); a Linear whose output the loss never uses still gets zeros."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3)).to(device)
    x, t = torch.randn(6, 5, device=device), torch.randn(6, 3, device=device)
    loss_fn = nn.functional.mse_loss
    expected = ref.per_sample_grads(model, loss_fn, x, t)
    got = linalg.per_sample_grads(torch.compile(model, backend="aot_eager"), loss_fn, x, t)
    for name in expected:
        torch.testing.assert_close(got["_orig_mod." + name], expected[name])


def test_memory_info(device):
    info = linalg.memory_info(device)
    assert set(info) == {"total", "free", "reserved", "allocated"}
    assert 0 < info["free"] <= info["total"]
    assert 0 <= info["allocated"] <= info["reserved"] or device == "cpu"


# ---------------------------------------------------------------- Shampoo

def _quadratic(device, dim=12, seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    H = random_spd(dim, 100.0, generator=gen).to(device, dtype)
    target = torch.randn(dim, 6, generator=gen, dtype=dtype).to(device)
    W = nn.Parameter(torch.zeros(dim, 6, device=device, dtype=dtype))
    b = nn.Parameter(torch.zeros(6, device=device, dtype=dtype))

    def loss_fn():
        E = W - target
        return 0.5 * (E * (H @ E)).sum() + 0.5 * ((b - 1) ** 2).sum()

    return [W, b], loss_fn


@pytest.mark.parametrize("block_size", [1024, 5])
def test_shampoo_converges_on_quadratic(device, block_size):
    params, loss_fn = _quadratic(device)
    opt = linalg.Shampoo(params, lr=0.05, update_freq=2, block_size=block_size)
    first = loss_fn().item()
    for _ in range(300):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
    assert loss_fn().item() < 1e-3 * first


def test_shampoo_state_dict_resumes_identically(device):
    params, loss_fn = _quadratic(device)
    opt = linalg.Shampoo(params, lr=0.02, update_freq=3, block_size=5)

    def run(opt, params, steps):
        for _ in range(steps):
            opt.zero_grad()
            loss_fn().backward()
            opt.step()

    run(opt, params, 4)
    snapshot = copy.deepcopy(opt.state_dict())
    weights = [p.detach().clone() for p in params]
    run(opt, params, 5)
    after = [p.detach().clone() for p in params]
    # rewind: same weights, fresh optimizer loaded from the snapshot
    with torch.no_grad():
        for p, w in zip(params, weights):
            p.copy_(w)
    opt2 = linalg.Shampoo(params, lr=0.02, update_freq=3, block_size=5)
    opt2.load_state_dict(snapshot)
    run(opt2, params, 5)
    for p, a in zip(params, after):
        assert torch.equal(p.detach(), a)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_shampoo_state_dict_keeps_half_parameters_statistics_in_float32(device, dtype):
    """The statistics and roots of a 16-bit parameter are kept in float32; torch's load_state_dict casts every
    floating state tensor to its parameter's dtype, which rounded them to float16 / bfloat16. A rank-deficient
    statistic (64 inputs, 8 samples so far) then had eigenvalues of -5e-4 of its norm, below root_eps: the
    resumed bfloat16 run went NaN, the float16 one 0.15 away from the uninterrupted run (until session 43)."""
    torch.manual_seed(0)
    model = nn.Linear(64, 6).to(device=device, dtype=dtype)
    data = [(torch.randn(4, 64, device=device, dtype=dtype), torch.randn(4, 6, device=device, dtype=dtype))
            for _ in range(8)]

    def run(opt, model, batches):
        for x, t in batches:
            opt.zero_grad()
            ((model(x) - t) ** 2).mean().backward()
            opt.step()

    # eps: float16's Adam moments need one it can hold (with 1e-8, torch.optim.Adam's float16 steps are NaN too)
    opt = linalg.Shampoo(model.parameters(), lr=1e-2, eps=1e-3)
    run(opt, model, data[:2])
    snapshot = copy.deepcopy(opt.state_dict())
    resumed = copy.deepcopy(model)
    run(opt, model, data[2:])
    opt2 = linalg.Shampoo(resumed.parameters(), lr=1e-2, eps=1e-3)
    opt2.load_state_dict(snapshot)
    for key in ("L", "R", "PL", "PR"):
        for saved, loaded in zip(snapshot["state"][0][key], opt2.state[resumed.weight][key]):
            assert loaded.dtype == torch.float32 and torch.equal(loaded, saved)
    run(opt2, resumed, data[2:])
    for p, q in zip(model.parameters(), resumed.parameters()):
        assert torch.isfinite(p).all() and torch.equal(p, q)


def test_shampoo_pickles_into_another_process(tmp_path):
    """torch.save(optimizer) loaded in a new process raised ModuleNotFoundError for the build's private module
    ('_jk_ops_jk_linalg_<key>') until session 45; the state comes back whole."""
    model = nn.Linear(6, 4)
    opt = linalg.Shampoo(model.parameters(), lr=1e-2)
    model(torch.randn(8, 6)).pow(2).sum().backward()
    opt.step()
    twin = copy.deepcopy(opt)
    assert type(twin) is type(opt) and torch.equal(twin.state[twin.param_groups[0]["params"][0]]["PL"][0],
                                                   opt.state[model.weight]["PL"][0])
    path = tmp_path / "opt.pt"
    torch.save(opt, path)
    code = textwrap.dedent(f"""
        import torch
        opt = torch.load({str(path)!r}, weights_only=False)
        weight = opt.param_groups[0]["params"][0]
        print(type(opt).__name__, int(opt.state[weight]["step"]), opt.state[weight]["PL"][0].sum().item().hex())
        """)
    out = subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(os.path.dirname(__file__)),
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["Shampoo", "1", opt.state[model.weight]["PL"][0].sum().item().hex()]


def test_shampoo_eigh_route_agrees(device):
    results = []
    for method in ("newton", "eigh"):
        params, loss_fn = _quadratic(device, dtype=torch.float64)
        opt = linalg.Shampoo(params, lr=0.02, root_method=method)
        for _ in range(5):
            opt.zero_grad()
            loss_fn().backward()
            opt.step()
        results.append(params[0].detach().clone())
    torch.testing.assert_close(results[0], results[1], atol=1e-9, rtol=1e-7)


# ---------------------------------------------------------------- compile and CUDA graphs

def test_torch_compile_fullgraph():
    A = random_spd(8, 10).float()
    B = torch.randn(2, 3)

    def f(a, b):
        return linalg.matrix_inverse_root(a, 4, 1e-6, fallback="never").sum() + linalg.kron(b, b).sum()

    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(A, B), f(A, B))


# The batch users vary: the leading batch of matrices (matrix_inverse_root, kron) and of samples
# (per_sample_grad_linear). Compile and export see one graph for every batch size.
def test_inverse_root_dynamic_batch_compiles_once_and_exports(device):
    A = random_spd(6, 10, batch=(17,), device=device).float()
    check_dynamic_batch(lambda a: linalg.matrix_inverse_root(a, 4, 1e-6, fallback="never", return_residual=True),
                        lambda b: (A[:b].clone(),))


def test_inverse_root_dynamic_size_compiles_once_and_exports():
    """fallback="auto" acts as "never" under torch.compile and torch.export, whatever n: its CPU shortcut for one
    matrix of n >= 64 compared n before asking whether it was tracing, so that guard on n made torch.compile
    (dynamic=True) compile again past n = 64 and torch.export refuse a dynamic n unless capped at max=63."""
    from torch._dynamo.utils import counters

    def f(a):
        return linalg.matrix_inverse_root(a, 2)

    make = lambda n: random_spd(n, 10, generator=torch.Generator().manual_seed(n))  # noqa: E731
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(f, dynamic=True, fullgraph=True)
    for n in (8, 100, 20):
        torch.testing.assert_close(compiled(make(n)), f(make(n)))
    assert counters["stats"]["unique_graphs"] == 1, f"{counters['stats']['unique_graphs']} graphs for 3 sizes"

    class Wrapper(torch.nn.Module):
        def forward(self, a):
            return f(a)

    n = torch.export.Dim("n", min=2, max=4096)
    program = torch.export.export(Wrapper(), (make(8),), dynamic_shapes=({0: n, 1: n},))
    torch.testing.assert_close(program.module()(make(100)), f(make(100)))


def test_kron_dynamic_batch_compiles_once_and_exports(device):
    check_dynamic_batch(linalg.kron,
                        lambda b: (torch.randn(b, 2, 3, device=device), torch.randn(b, 4, 2, device=device)))


@pytest.mark.parametrize("with_bias", [True, False])
def test_per_sample_grad_linear_dynamic_batch_compiles_once_and_exports(device, with_bias):
    check_dynamic_batch(lambda x, g: linalg.per_sample_grad_linear(x, g, with_bias),
                        lambda b: (torch.randn(b, 6, device=device), torch.randn(b, 3, device=device)))


@needs_graphs
@needs_cuda
def test_cuda_graph_capture():
    A = random_spd(64, 1e3, batch=(4,), device="cuda").float()
    x, g = torch.randn(8, 32, device="cuda"), torch.randn(8, 16, device="cuda")
    K1, K2 = torch.randn(5, 5, device="cuda"), torch.randn(10, 10, device="cuda")
    linalg.matrix_inverse_root(A, fallback="auto"), linalg.kron(K1, K2), linalg.per_sample_grad_linear(x, g)  # warm up
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        X = linalg.matrix_inverse_root(A, fallback="auto")  # "auto" acts as "never" while capturing
        K = linalg.kron(K1, K2)
        gw, gb = linalg.per_sample_grad_linear(x, g)
    A.copy_(random_spd(64, 1e3, batch=(4,), device="cuda").float())
    graph.replay()
    torch.cuda.synchronize()
    assert rel_err(X, ref.matrix_inverse_root(A, 4, 1e-6)) <= 1e-3
    torch.testing.assert_close(K, torch.kron(K1, K2))
    torch.testing.assert_close(gw, ref.per_sample_grad_linear(x, g)[0])


@needs_cuda
def test_kron_write_bound_shapes_cuda():
    A, B = torch.randn(50, 50, device="cuda"), torch.randn(100, 100, device="cuda")
    torch.testing.assert_close(linalg.kron(A, B), torch.kron(A, B))
    x, g = torch.randn(256, 1024, device="cuda"), torch.randn(256, 1024, device="cuda")
    gw, gb = linalg.per_sample_grad_linear(x, g)
    torch.testing.assert_close(gw, torch.einsum("bo,bi->boi", g, x))
    torch.testing.assert_close(gb, g)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shapes", [
    ((3, 7, 5), (3, 11, 8)),  # batched: positions across b, i and k
    ((2, 4, 3), (2, 5, 3)),  # rows of 9: 16-byte vectors across rows (kron_flat_kernel)
    ((4, 6), (3, 4)),  # rows of 24, q = 4: half types' 8-wide vectors read B in two pieces
    ((2, 3, 8), (2, 4, 5)),  # q = 5: B read element by element, into the next A column
    ((2, 3, 2), (2, 4, 7)),  # rows of 14: 8-byte stores of float32 (4-byte of half types), q odd
    ((1, 3, 1), (1, 5, 6)),  # rows of 6: narrower stores, B in pairs
    ((2, 301, 1), (2, 1, 40)),  # short rows: a thread's next vector lies in another row
    ((1, 3, 150), (1, 2, 16)),  # long rows: the next vector is found by a carry
    ((2, 300, 2), (2, 250, 4)),  # 150000 rows of 8: many blocks, a partial last one
    ((2, 1000, 3), (2, 5, 400)),  # 10000 rows of 1200
    ((2, 3, 400), (2, 4, 6)),  # rows of 2400, q = 6: B in pairs
    ((1, 2, 1029), (1, 3, 1)),  # rows of 1029: across rows, a partial last vector
])


def test_kron_kernel_paths(device, dtype, shapes):
    # The CUDA kernels' vector widths and walks; on the CPU, 16-bit rows widened and narrowed in runs of q.
    A = torch.randn(*shapes[0], device=device).to(dtype)
    B = torch.randn(*shapes[1], device=device).to(dtype)
    # Each element is one product rounded once, as torch rounds it: exact match.
    expected = ref.kron(A.double(), B.double()).to(dtype)
    torch.testing.assert_close(linalg.kron(A, B), expected, atol=0, rtol=0)


@needs_cuda
@needs_two_gpus
def test_cuda_second_device_while_current_is_0():
    # tensors on cuda:1, the current device 0, cuda:1's current stream a side stream (conftest.on_two_gpus):
    # matrix_inverse_root's small-matrix kernel (float64 n = 64 opts in to more than 48 KB of shared memory, a
    # setting of the current device's), its general route (bfloat16 pieces, the diagonal finish) and kron's
    # kernels give on cuda:1 what they give on cuda:0
    def root(A):
        return linalg.matrix_inverse_root(A, 4, 1e-6, fallback="never", return_residual=True)

    for n, batch, dtype in [(64, (3,), torch.float64), (20, (5,), torch.float32), (100, (2,), torch.float32),
                            (70, (), torch.float64)]:
        A = random_spd(n, 1e3, batch=batch, dtype=dtype)
        want, got = on_two_gpus(root, A)
        for w, g in zip(want, got):
            torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-9)
    diagonal = torch.diag_embed(torch.rand(2, 70, dtype=torch.float64) + 0.5)  # general route, diagonal finish
    want, got = on_two_gpus(root, diagonal)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    for A, B in [(torch.randn(3, 7, 5), torch.randn(3, 4, 9)), (torch.randn(50, 50), torch.randn(20, 20)),
                 (torch.randn(4, 6).half(), torch.randn(5, 3).half())]:
        want, got = on_two_gpus(linalg.kron, A, B)
        assert torch.equal(got, want)
    x, g = torch.randn(64, 33), torch.randn(64, 17)
    want, got = on_two_gpus(lambda x, g: linalg.per_sample_grad_linear(x, g), x, g)
    for w, gg in zip(want, got):
        assert torch.equal(gg, w)


@needs_cuda
def test_kron_misaligned_b_and_many_rows_cuda():
    base = torch.randn(2 * 5 * 8 + 1, device="cuda")
    B = base[1:].view(2, 5, 8)  # q % 4 == 0, but B starts 4 bytes past a 16-byte boundary
    assert B.data_ptr() % 16 != 0
    A = torch.randn(2, 3, 4, device="cuda")
    torch.testing.assert_close(linalg.kron(A, B), ref.kron(A, B), atol=0, rtol=0)
    # 256000 rows of 8 columns, and 420000 rows of 2 (scalar path): the grid steps over rows.
    x, g = torch.randn(128, 8, device="cuda"), torch.randn(128, 2000, device="cuda")
    gw, _ = linalg.per_sample_grad_linear(x, g)
    torch.testing.assert_close(gw, g[:, :, None] * x[:, None, :], atol=0, rtol=0)
    A, B = torch.randn(600, 1, device="cuda"), torch.randn(700, 2, device="cuda")
    torch.testing.assert_close(linalg.kron(A, B), torch.kron(A, B), atol=0, rtol=0)


# ---------------------------------------------------------------- property-based

def _strided(t, how):
    """t's values in a non-contiguous layout: "contig", "slice" (every other element of a
    larger buffer) or "mT" (a transposed copy viewed back)."""
    if how == "slice":
        big = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
        big[..., ::2] = t
        return big[..., ::2]
    if how == "mT" and t.dim() >= 2:
        return t.mT.contiguous().mT
    return t


_layouts = st.sampled_from(["contig", "slice", "mT"])
_batch = st.lists(st.integers(0, 3), max_size=2).map(tuple)


@settings(max_examples=30, deadline=None)
@given(device=st.sampled_from(DEVICES), dtype=st.sampled_from(list(TOLERANCES)), batch=_batch,
       dims=st.tuples(*[st.integers(1, 6)] * 4), layouts=st.tuples(_layouts, _layouts))


def test_property_kron(device, dtype, batch, dims, layouts):
    m, n, p, q = dims
    A = _strided(torch.randn(*batch, m, n, device=device).to(dtype), layouts[0])
    B = _strided(torch.randn(*batch, p, q, device=device).to(dtype), layouts[1])
    atol, rtol = TOLERANCES[dtype]
    torch.testing.assert_close(linalg.kron(A, B), ref.kron(A, B), atol=atol, rtol=rtol)


@settings(max_examples=30, deadline=None)
@given(device=st.sampled_from(DEVICES), dtype=st.sampled_from(list(TOLERANCES)), batch=st.integers(0, 5),
       dims=st.tuples(st.integers(1, 9), st.integers(1, 9)), layouts=st.tuples(_layouts, _layouts),
       with_bias=st.booleans())


def test_property_per_sample_grad_linear(device, dtype, batch, dims, layouts, with_bias):
    x = _strided(torch.randn(batch, dims[0], device=device).to(dtype), layouts[0])
    g = _strided(torch.randn(batch, dims[1], device=device).to(dtype), layouts[1])
    gw, gb = linalg.per_sample_grad_linear(x, g, with_bias)
    rw, rb = ref.per_sample_grad_linear(x, g, with_bias)
    atol, rtol = TOLERANCES[dtype]
    torch.testing.assert_close(gw, rw, atol=atol, rtol=rtol)
    assert (gb is None) == (rb is None)
    if with_bias:
        torch.testing.assert_close(gb, rb)


@settings(max_examples=30, deadline=None)
@given(device=st.sampled_from(DEVICES), dtype=st.sampled_from([torch.float32, torch.float64]), batch=_batch,
       n=st.integers(1, 12), p=st.sampled_from([1, 2, 3, 4, 8]), log_cond=st.floats(0, 3),
       eps=st.sampled_from([0.0, 1e-3]), layout=_layouts, seed=st.integers(0, 2**31 - 1))


def test_property_matrix_inverse_root(device, dtype, batch, n, p, log_cond, eps, layout, seed):
    gen = torch.Generator().manual_seed(seed)
    A = _strided(random_spd(n, 10 ** log_cond, batch=batch, generator=gen).to(device, dtype), layout)
    X, residual = linalg.matrix_inverse_root(A, p, eps, fallback="never", return_residual=True)
    assert X.shape == A.shape and residual.shape == A.shape[:-2] and X.dtype == dtype
    if A.numel():
        assert rel_err(X, ref.matrix_inverse_root(A, p, eps)) <= (1e-3 if dtype == torch.float32 else 1e-6)


def test_benchmark_cases_construct():
    import importlib

    cases = importlib.import_module("benchmarks.cases_linalg").cases("cpu")
    assert cases and all(c.family == "linalg" for c in cases)


# ---------------------------------------------------------------- session 40's review

def test_inverse_root_default_fallback_under_vmap_and_on_meta_and_fake_tensors():
    """fallback="auto" read the residual on the host: vmap refused the data-dependent branch, and meta and
    fake tensors have no values. Under vmap every matrix also takes eigh, kept where Newton did not converge."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    A = torch.stack([2 * torch.eye(3), torch.diag(torch.tensor([1.0, 2.0, 3.0]))])
    by_vmap = torch.vmap(linalg.matrix_inverse_root)(A)
    torch.testing.assert_close(by_vmap, torch.stack([linalg.matrix_inverse_root(a) for a in A]))
    grads = torch.func.vmap(torch.func.grad(lambda a: linalg.matrix_inverse_root(a, 4, 1e-3).sum()))(A.double())
    assert torch.isfinite(grads).all()
    assert linalg.matrix_inverse_root(torch.empty(2, 4, 4, device="meta")).shape == (2, 4, 4)
    with FakeTensorMode():
        assert linalg.matrix_inverse_root(torch.empty(4, 4)).shape == (4, 4)


def test_inverse_root_default_fallback_under_jit_trace_acts_as_never():
    """torch.jit.trace recorded "auto"'s host-side choice: traced on a batch with one unconverged matrix, the graph
    re-rooted a fixed count of them (eigh's result viewed to one matrix's shape), so a batch with none or two
    raised in the TorchScript interpreter; traced on converged input it never fell back (session 45). While
    tracing "auto" acts as "never", as under torch.compile: no crash, one behaviour for every input."""
    import warnings

    def spd(log_cond, n=8):
        q, _ = torch.linalg.qr(torch.randn(n, n, dtype=torch.float64))
        return ((q * torch.logspace(0, -log_cond, n, dtype=torch.float64)) @ q.T).float()

    torch.manual_seed(0)
    good, bad = spd(1), spd(9)
    traced_on, other = torch.stack([bad, good]), torch.stack([good, good])
    assert not torch.equal(linalg.matrix_inverse_root(traced_on, 4, 1e-10),
                           linalg.matrix_inverse_root(traced_on, 4, 1e-10, fallback="never"))  # "auto" falls back
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # jit.trace's deprecation
        traced = torch.jit.trace(lambda a: linalg.matrix_inverse_root(a, 4, 1e-10), (traced_on,))
    for A in (traced_on, other):
        assert torch.equal(traced(A), linalg.matrix_inverse_root(A, 4, 1e-10, fallback="never"))


def test_vmap_of_inverse_root_and_kron_is_one_batched_call(device):
    """Without batching rules torch.vmap called the op once per member (and warned of a performance drop):
    the vmapped dimension is now one more batch dimension of a single call, for the op and under grad."""
    from torch.profiler import ProfilerActivity, profile

    A = torch.randn(6, 4, 4, dtype=torch.float64, device=device)
    A = A @ A.mT + torch.eye(4, dtype=torch.float64, device=device)
    B = torch.randn(2, 3, dtype=torch.float64, device=device)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        X, residual = torch.vmap(lambda a: linalg.matrix_inverse_root(a, fallback="never", return_residual=True))(A)
        K = torch.vmap(linalg.kron, in_dims=(0, None))(A, B)  # B unbatched: expanded to every member
    names = [event.name for event in prof.events()]
    # one call at the vmap level and one batched call below it (the fallback: 1 + 6)
    assert sum(name.endswith("::matrix_inverse_root") for name in names) == 2, names
    assert sum(name.endswith("::kron") for name in names) == 2, names
    torch.testing.assert_close(X, torch.stack([linalg.matrix_inverse_root(a, fallback="never") for a in A]))
    assert residual.shape == (6,)
    torch.testing.assert_close(K, torch.stack([linalg.kron(a, B) for a in A]))
    by_rows = torch.vmap(linalg.matrix_inverse_root, in_dims=1)(A.view(2, 3, 4, 4))  # a vmapped dim inside
    torch.testing.assert_close(by_rows, X.view(2, 3, 4, 4).transpose(0, 1))
    grads = torch.func.vmap(torch.func.grad(lambda a, b: linalg.kron(a, b).pow(2).sum()), in_dims=(0, None))(A, B)
    torch.testing.assert_close(grads, torch.stack([2 * (B * B).sum() * a for a in A]))


@pytest.mark.parametrize("args, kwargs, name", [((-2,), {}, "p"), ((0,), {}, "p"), ((4, -1.0), {}, "eps"),
                                                ((), {"long": True}, "A"), ((), {"nan": True}, "NaN")])


def test_inverse_root_always_checks_its_arguments(args, kwargs, name):
    """fallback="always" (eigh only) skipped every check: p = -2 gave A^(+1/2), p = 0 ZeroDivisionError."""
    A = 4 * torch.eye(3)
    if kwargs.get("long"):
        A = A.long()
    if kwargs.get("nan"):
        A = torch.full((3, 3), float("nan"))
    with pytest.raises(ValueError, match=name):
        linalg.matrix_inverse_root(A, *args, fallback="always")


@pytest.mark.parametrize("fallback", ["auto", "never", "always"])
def test_inverse_root_refuses_a_none_matrix_by_name_on_every_route(fallback):
    """fallback="always" raised AttributeError "'NoneType' object has no attribute 'is_meta'" for A=None, where
    the other routes say "A must be a tensor, got None" (session 44's message review)."""
    with pytest.raises(ValueError, match=r"^A must be a tensor, got None$"):
        linalg.matrix_inverse_root(None, fallback=fallback)


@pytest.mark.parametrize("kwargs", [{"betas": (0.9, 1.0)}, {"lr": float("nan")}, {"update_freq": 1.5},
                                    {"eps": float("nan")}, {"weight_decay": float("nan")}, {"eps": float("inf")},
                                    {"weight_decay": float("inf")}, {"betas": (0.9,)}, {"update_freq": True}])
def test_shampoo_refuses_settings_that_break_it(kwargs):
    """betas[1] = 1 made the first step NaN (bias correction 1 - 1); lr NaN and a fractional update_freq passed.
    So did eps and weight_decay NaN, whose message says ">= 0", until session 44: every parameter came out NaN.
    Until session 52 inf eps froze every parameter in silence, inf weight_decay made them inf, and one beta raised
    IndexError."""
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        linalg.Shampoo([nn.Parameter(torch.randn(4, 3))], **kwargs)


def test_shampoo_takes_numpy_integers_for_its_counts():
    """update_freq=np.int64(2) was refused as "must be integers" (session 52's review)."""
    np = pytest.importorskip("numpy")
    p = nn.Parameter(torch.randn(4, 3))
    opt = linalg.Shampoo([p], update_freq=np.int64(2), block_size=np.int64(2))
    p.grad = torch.randn(4, 3)
    before = p.detach().clone()
    opt.step()
    assert torch.isfinite(p).all() and not torch.equal(p, before)


def test_shampoo_refuses_a_block_size_changed_after_the_first_step_before_changing_any_state():
    """The statistics are blocked at the first step: a group's block_size changed later raised "Bad in-place call:
    input tensor size [3, 3] and output tensor size [2, 2]" from their update (session 52's review)."""
    p = nn.Parameter(torch.randn(3, 4))
    opt = linalg.Shampoo([p], block_size=3)
    p.grad = torch.randn(3, 4)
    opt.step()
    opt.param_groups[0]["block_size"] = 2
    before = {k: [t.clone() for t in v] if isinstance(v, list) else v.clone() for k, v in opt.state[p].items()}
    with pytest.raises(ValueError, match=r"blocked in another size than block_size=2"):
        opt.step()
    for k, v in opt.state[p].items():
        for a, b in zip(v if isinstance(v, list) else [v], before[k] if isinstance(v, list) else [before[k]]):
            assert torch.equal(a, b), k


def test_inverse_root_refuses_a_bool_p():
    """p=True is 1 to Python and to the op's schema: it returned the inverse (session 52's review)."""
    for fallback in ("auto", "always"):
        with pytest.raises(TypeError, match="^p must be an integer in \\[1, 32\\], got bool True$"):
            linalg.matrix_inverse_root(4 * torch.eye(3), True, fallback=fallback)


@pytest.mark.parametrize("shape", [(4,), (3, 4)])
def test_shampoo_refuses_complex_parameters_before_changing_any_state(shape):
    """A complex parameter was not refused: a 1-D one took an 'Adam' step with g * g for |g|^2 (0.1j off Adam's
    step at lr 0.1), a 2-D one raised "A must be float32 or float64, got ComplexFloat" from the root, after every
    earlier parameter's moments and step count had moved. Complex (and sparse) gradients are refused first."""
    real = nn.Parameter(torch.randn(3, 4))
    cplx = nn.Parameter(torch.randn(shape, dtype=torch.complex64))
    real.grad, cplx.grad = torch.randn(3, 4), torch.randn(shape, dtype=torch.complex64)
    opt = linalg.Shampoo([real, cplx], lr=0.1)
    with pytest.raises(RuntimeError, match=r"param_groups\[0\]\['params'\]\[1\] is complex"):
        opt.step()
    assert not opt.state


def test_shampoo_refuses_sparse_gradients_before_changing_any_state():
    dense, emb = nn.Parameter(torch.randn(3, 4)), nn.Embedding(5, 3, sparse=True)
    dense.grad = torch.randn(3, 4)
    emb(torch.tensor([1])).sum().backward()
    opt = linalg.Shampoo([{"params": [dense]}, {"params": emb.parameters()}])
    with pytest.raises(RuntimeError, match=r"param_groups\[1\]\['params'\]\[0\] has a sparse gradient"):
        opt.step()
    assert not opt.state


def test_shampoo_steps_a_parameter_of_no_rows():
    p = nn.Parameter(torch.randn(0, 7))
    p.grad = torch.zeros(0, 7)
    linalg.Shampoo([p]).step()
    assert p.shape == (0, 7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_shampoo_steps_after_a_zero_gradient(device, dtype):
    """A parameter whose first gradient is 0 (behind a zero-initialized layer: LoRA's A, adaLN-Zero) got the
    root of a zero statistic, (root_eps tiny)^(-1/4) I: 5e10 I in float32, 1e78 I in float64. Until the next
    root update (update_freq > 1) the grafting norm of PL m PR overflowed and the parameter did not move at
    all (until session 43). A zero statistic keeps the identity; every step has Adam's length, as grafting says."""
    W = nn.Parameter(torch.randn(5, 7, device=device, dtype=dtype))
    opt = linalg.Shampoo([W], lr=0.1, update_freq=3, block_size=3)
    gen = torch.Generator().manual_seed(0)
    for step in range(5):
        W.grad = torch.randn(5, 7, generator=gen, dtype=dtype).to(device) if step else torch.zeros_like(W)
        before = W.detach().clone()
        opt.step()
        state = opt.state[W]
        t, (beta1, beta2) = state["step"], opt.defaults["betas"]
        adam = (state["exp_avg"] / (1 - beta1 ** t)) / ((state["exp_avg_sq"] / (1 - beta2 ** t)).sqrt() + 1e-8)
        moved = torch.linalg.vector_norm(W.detach() - before)
        assert torch.isfinite(W).all()
        torch.testing.assert_close(moved, 0.1 * torch.linalg.vector_norm(adam), rtol=1e-4, atol=0)


@pytest.mark.parametrize("root_eps", [1e-8, 1e-12])
def test_shampoo_float32_takes_a_root_eps_below_float32s_resolution(device, root_eps):
    """A float32 statistic is rounded: G Gᵀ of a rank-deficient gradient (8 samples, 32 or 64 wide) has
    eigenvalues down to about -1.5e-8 of its norm. The Newton iteration roots S/||S|| + root_eps I as it is
    (it cannot clamp them as eigh does), so root_eps = 1e-12 (the epsilon of Meta's Distributed Shampoo
    README) gave NaN parameters, and 1e-8 roots of ~5e6 on those directions: the loss 5.5x eigh's after 20
    steps (0.107 against 0.019), where the docstring promised convergence for any root_eps in (0, 1) (until
    session 44). root_eps is now at least the statistic's dtype's eps, on both routes. (At that root_eps
    float32 roots of a rank-deficient statistic still differ from eigh's by a few % on its null directions,
    as they do at root_eps = 1e-7: hence the loose parameter bar.)"""
    results = []
    for method in ("newton", "eigh"):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 4)).to(device)
        x, y = torch.randn(8, 32, device=device), torch.randn(8, 4, device=device)
        opt = linalg.Shampoo(model.parameters(), lr=1e-2, root_eps=root_eps, root_method=method)
        for _ in range(20):
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
        results.append(([p.detach().clone() for p in model.parameters()], ((model(x) - y) ** 2).mean().item()))
    (newton, newton_loss), (eigh, eigh_loss) = results
    assert math.isfinite(newton_loss) and abs(newton_loss - eigh_loss) <= 0.05 * eigh_loss
    for p, q in zip(newton, eigh):
        assert torch.isfinite(p).all()
        torch.testing.assert_close(p, q, atol=5e-2, rtol=0)




_script_opt = None  # a script's or notebook's optimizer: a global, which Dynamo specializes on (a closure's or an
                    # argument's Python ints it makes dynamic after one recompile)


def _script_step():
    _script_opt.step()


def _shampoo_mlp_run(steps, backend=None, dtype=torch.float64, device="cpu", **kwargs):
    """A small MLP (Linear, Tanh, Linear) trained for `steps` steps by Shampoo, its step compiled with `backend`
    if one is given (as a script does: a function that calls the global optimizer's step). Returns the parameters
    after it and the optimizer."""
    global _script_opt
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3)).to(dtype).to(device)
    x, y = torch.randn(8, 6, dtype=dtype).to(device), torch.randn(8, 3, dtype=dtype).to(device)
    opt = _script_opt = linalg.Shampoo(model.parameters(), **{"lr": 1e-2, **kwargs})
    step = torch.compile(_script_step, backend=backend, fullgraph=True) if backend else opt.step
    for _ in range(steps):
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        step()
    _script_opt = None
    return [p.detach().clone() for p in model.parameters()], opt


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_shampoo_compiled_step_compiles_a_bounded_number_of_times(device, backend):
    """The step count was a Python int in each parameter's state, so torch.compile guarded on its value: a
    compiled step of a global optimizer compiled again at every step, and from the 9th on (Dynamo's recompile
    limit) ran eager with a warning (until session 46). The count is a CPU tensor now, as in torch's optimizers,
    and torch.cond decides whether a step recomputes the roots (update_freq = 2 here), in one graph
    (fullgraph=True). float64: Dynamo's addcmul_ rounds a float32 ulp apart from eager's."""
    from torch._dynamo.testing import CompileCounterWithBackend
    if backend == "inductor" and device == "cpu":
        pytest.skip("inductor runs on the GPU machine (on the CPU it compiles C++ of its own: minutes here)")
    torch._dynamo.reset()
    counter = CompileCounterWithBackend(backend)
    # On CUDA the step counts and the due flags stay CPU tensors beside the device's statistics (torch.cond's
    # predicate included).
    got, _ = _shampoo_mlp_run(12, counter, update_freq=2, device=device)
    want, _ = _shampoo_mlp_run(12, update_freq=2, device=device)
    torch._dynamo.reset()
    assert counter.frame_count <= 3, f"{counter.frame_count} compiles over 12 steps"
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)


def test_shampoo_loads_a_checkpoint_with_python_int_step_counts():
    """Checkpoints from before session 46 hold each step count as a Python int; they load, the count becomes the
    tensor step() counts in, and the run goes on as one that never stopped."""
    want, _ = _shampoo_mlp_run(5, update_freq=2)
    _, opt = _shampoo_mlp_run(3, update_freq=2)
    old = copy.deepcopy(opt.state_dict())
    for param_state in old["state"].values():
        param_state["step"] = int(param_state["step"])
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3)).double()
    x, y = torch.randn(8, 6, dtype=torch.float64), torch.randn(8, 3, dtype=torch.float64)
    with torch.no_grad():
        for p, q in zip(model.parameters(), opt.param_groups[0]["params"]):
            p.copy_(q)
    resumed = linalg.Shampoo(model.parameters(), lr=1e-2, update_freq=2)
    resumed.load_state_dict(old)
    assert all(torch.is_tensor(s["step"]) and s["step"].item() == 3 for s in resumed.state.values())
    for _ in range(2):
        resumed.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        resumed.step()
    for p, w in zip(model.parameters(), want):
        assert torch.equal(p.detach(), w)


@pytest.mark.parametrize("setting", [{"root_method": "Newton"}, {"betas": (0.9, 1.0)}, {"block_size": 0},
                                     {"update_freq": 0}, {"lr": float("nan")}, {"root_eps": 0.0}])
@pytest.mark.parametrize("how", ["constructor", "add_param_group"])
def test_shampoo_refuses_bad_settings_of_a_param_group_by_name(setting, how):
    """Only the constructor's keyword arguments were checked, not a param group's own settings (the usual way to
    give one layer other ones): root_method="Newton" in a group ran eigh in silence, betas[1] = 1 made the
    parameters NaN, lr NaN passed, and block_size=0 / update_freq=0 failed at the first step with Python's
    "range() arg 3 must not be zero" / "integer modulo by zero" (until session 46)."""
    W, V = nn.Parameter(torch.randn(4, 3)), nn.Parameter(torch.randn(3, 3))
    W.grad, V.grad = torch.randn(4, 3), torch.randn(3, 3)
    name = next(iter(setting))
    with pytest.raises(ValueError, match=rf"param_groups\[1\].*{name}"):
        if how == "constructor":
            linalg.Shampoo([{"params": [W]}, {"params": [V], **setting}]).step()
        else:
            opt = linalg.Shampoo([W])
            opt.add_param_group({"params": [V], **setting})
            opt.step()


@pytest.mark.parametrize("norm", [nn.BatchNorm1d(8), nn.BatchNorm1d(8, affine=False, track_running_stats=False)])
def test_per_sample_grads_refuses_batchnorm_on_batch_statistics_by_name(norm):
    """BatchNorm in training mode (or without running statistics, in any mode) normalizes each sample by the
    batch's statistics, so per-sample gradients are not defined (the docstring asks for eval-mode BatchNorm). It
    failed deep inside torch.func: "During a grad (vjp, jvp, grad, etc) transform, the function provided attempted
    to call in-place operation (aten::add_.Tensor) ..." or "Expected more than 1 value per channel when training"
    (until session 46). It is refused by the module's name."""
    model = nn.Sequential(nn.Linear(4, 8), norm, nn.ReLU(), nn.Linear(8, 2)).train()
    x, y = torch.randn(6, 4), torch.randn(6, 2)
    with pytest.raises(ValueError, match=r"model\.1 \(BatchNorm1d\).*batch statistics.*eval\(\)"):
        linalg.per_sample_grads(model, lambda o, t: ((o - t) ** 2).sum(), x, y)
    if norm.track_running_stats:  # in eval mode it uses its running statistics: per sample, accepted
        model.eval()
        got = linalg.per_sample_grads(model, lambda o, t: ((o - t) ** 2).sum(), x, y)
        want = ref.per_sample_grads(model, lambda o, t: ((o - t) ** 2).sum(), x, y)
        for name in want:
            torch.testing.assert_close(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_per_sample_grads_with_dropout_in_training_mode():
    """Dropout in training mode: a model of Linears alone gets the per-sample gradients of the batch forward's
    masks (each sample's rows of the one forward). Parameters that go through torch.func (a LayerNorm's) would need
    a forward per sample, which cannot repeat those masks; that failed with torch's "vmap: called random operation
    while in randomness error mode. Please either use the 'same' or 'different' randomness flags on vmap", a vmap
    the caller never called (until session 46). It is refused naming the parameters, Dropout and model.eval()."""
    loss_fn = lambda o, t: ((o - t) ** 2).sum()
    x, y = torch.randn(6, 4), torch.randn(6, 2)
    torch.manual_seed(0)
    linears = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2)).train()
    torch.manual_seed(1)
    got = linalg.per_sample_grads(linears, loss_fn, x, y)
    torch.manual_seed(1)
    out = linears(x)  # the same masks: each sample's gradient through its own rows of this forward
    params = dict(linears.named_parameters())
    for i in range(6):
        want = torch.autograd.grad(loss_fn(out[i:i + 1], y[i:i + 1]), list(params.values()), retain_graph=True)
        for name, w in zip(params, want):
            torch.testing.assert_close(got[name][i], w)
    mixed = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Dropout(0.5), nn.Linear(8, 2)).train()
    with pytest.raises(RuntimeError, match=r"per_sample_grads: .*Dropout.*'1\.weight'.*model\.eval\(\)"):
        linalg.per_sample_grads(mixed, loss_fn, x, y)
    mixed.eval()
    for name, g in linalg.per_sample_grads(mixed, loss_fn, x, y).items():
        torch.testing.assert_close(g, ref.per_sample_grads(mixed, loss_fn, x, y)[name], rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- session 46's mutation review

def _shampoo_reference(params, grads_per_step, lr, betas, eps, weight_decay, update_freq, block_size, root_eps):
    """The docstring's Shampoo written out plainly in float64 (eigh roots): Adam moments with bias correction, per
    block EMA(G Gᵀ) and EMA(Gᵀ G) with betas[1], roots (S/||S||_F + root_eps I)^(-1/4) ||S||_F^(-1/4) recomputed
    on steps 1, 1 + update_freq, ..., the direction L^(-1/4) m_hat R^(-1/4) grafted to Adam's norm per parameter,
    decoupled weight decay; 1-D parameters take Adam's step."""
    beta1, beta2 = betas
    params = [p.detach().clone() for p in params]
    state = [dict(m=torch.zeros_like(p), v=torch.zeros_like(p)) for p in params]

    def root(S):
        norm = torch.linalg.matrix_norm(S)
        if norm == 0:
            return torch.eye(S.shape[0], dtype=S.dtype)
        L, V = torch.linalg.eigh(S / norm)
        return (V * (L.clamp_min(0) + root_eps).pow(-0.25)) @ V.T * norm ** -0.25

    for t, grads in enumerate(grads_per_step, start=1):
        for p, g, s in zip(params, grads, state):
            s["m"] = beta1 * s["m"] + (1 - beta1) * g
            s["v"] = beta2 * s["v"] + (1 - beta2) * g * g
            m_hat = s["m"] / (1 - beta1 ** t)
            adam = m_hat / ((s["v"] / (1 - beta2 ** t)).sqrt() + eps)
            if p.dim() >= 2:
                G, M = g.reshape(p.shape[0], -1), m_hat.reshape(p.shape[0], -1)
                D = torch.empty_like(M)
                for r0 in range(0, G.shape[0], block_size):
                    for c0 in range(0, G.shape[1], block_size):
                        key, Gb = (r0, c0), G[r0:r0 + block_size, c0:c0 + block_size]
                        L = s.setdefault(("L", key), torch.zeros(Gb.shape[0], Gb.shape[0], dtype=g.dtype))
                        R = s.setdefault(("R", key), torch.zeros(Gb.shape[1], Gb.shape[1], dtype=g.dtype))
                        s["L", key] = L = beta2 * L + (1 - beta2) * Gb @ Gb.T
                        s["R", key] = R = beta2 * R + (1 - beta2) * Gb.T @ Gb
                        if (t - 1) % update_freq == 0:
                            s["PL", key], s["PR", key] = root(L), root(R)
                        Mb = M[r0:r0 + block_size, c0:c0 + block_size]
                        D[r0:r0 + block_size, c0:c0 + block_size] = s["PL", key] @ Mb @ s["PR", key]
                direction = (D * adam.norm() / D.norm()).reshape(p.shape)
            else:
                direction = adam
            p.mul_(1 - lr * weight_decay).sub_(lr * direction)
    return params


@pytest.mark.parametrize("root_method", ["newton", "eigh"])
def test_shampoo_steps_match_the_documented_algorithm(root_method):
    """Five steps of Shampoo against the docstring's algorithm written out in plain PyTorch. The other tests check
    convergence on a quadratic and self-consistency (resume, eigh against newton), which mutants survived: no
    bias correction of the first moment, weight decay not scaled by lr, the roots refreshed on the wrong steps,
    the left statistic decayed with betas[0], no grafting, the root's norm factor inverted, eps inside the sqrt."""
    gen = torch.Generator().manual_seed(0)
    shapes = [(5, 7), (4, 2, 3), (6,)]
    params = [nn.Parameter(torch.randn(s, generator=gen, dtype=torch.float64)) for s in shapes]
    grads_per_step = [[torch.randn(s, generator=gen, dtype=torch.float64) * (1 + k) for s in shapes] for k in range(5)]
    options = dict(lr=0.05, betas=(0.8, 0.9), eps=1e-3, weight_decay=0.1, update_freq=2, block_size=3, root_eps=1e-3)
    want = _shampoo_reference(params, grads_per_step, **options)
    opt = linalg.Shampoo(params, root_method=root_method, **options)
    for grads in grads_per_step:
        for p, g in zip(params, grads):
            p.grad = g.clone()
        opt.step()
    for p, w in zip(params, want):
        torch.testing.assert_close(p.detach(), w, rtol=1e-7, atol=1e-9)


class _LinearCalledTwice(nn.Module):
    """One Linear applied twice (weight sharing across two steps): its per-sample gradient is the sum over calls."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(torch.tanh(self.lin(x)))


class _LinearOverPositions(nn.Module):
    """A Linear on (B, T, in): each sample's gradient sums the outer products and the bias terms over its T rows."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        return self.lin(x).sum(1)


@pytest.mark.parametrize("model", [_LinearCalledTwice, _LinearOverPositions])
def test_per_sample_grads_of_a_linear_called_twice_or_over_positions(device, model):
    """The Linear route's sums: over a module's calls (a mutant that kept only the last call's outer products) and,
    for (B, T, in) inputs, the bias over positions (a mutant that took position 0's) passed every test."""
    f64 = dict(dtype=torch.float64, device=device)
    torch.manual_seed(0)
    net = model().to(**f64)
    x = torch.randn(5, 4, **f64) if model is _LinearCalledTwice else torch.randn(5, 6, 4, **f64)
    y = torch.randn(5, 4 if model is _LinearCalledTwice else 3, **f64)
    ours = linalg.per_sample_grads(net, nn.functional.mse_loss, x, y)
    expected = ref.per_sample_grads(net, nn.functional.mse_loss, x, y)
    assert list(ours) == list(expected)
    for name in expected:
        torch.testing.assert_close(ours[name], expected[name])


@pytest.mark.parametrize("n", [4, 80])  # fallback="always", and "auto"'s CPU route to eigh (float64 n >= 64)
def test_inverse_root_eigh_routes_clamp_negative_eigenvalues(n):
    """The docstring: "the eigh routes and reference.py clamp them at 0". A matrix with an eigenvalue of -1e-3
    (below -eps: the unclamped root is NaN there) must give reference.py's finite answer; a mutant that dropped
    the clamp in _eigh_inverse_root passed every test."""
    gen = torch.Generator().manual_seed(0)
    Q, _ = torch.linalg.qr(torch.randn(n, n, dtype=torch.float64, generator=gen))
    lam = torch.linspace(1.0, 0.1, n, dtype=torch.float64)
    lam[-1] = -1e-3
    A = (Q * lam) @ Q.T
    want = ref.matrix_inverse_root(A, 4, 1e-6)
    for fallback in ("always", "auto"):
        got = linalg.matrix_inverse_root(A, 4, 1e-6, fallback=fallback)
        if fallback == "auto" and n < 64:
            continue  # the iteration roots A + eps I as it is (documented), not clamped
        assert torch.isfinite(got).all(), fallback
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shapes", [
    ((1, 64), (64, 1)),  # q = 1: a column on the right
    ((9, 5), (2, 2)),  # q = 2
    ((3, 6, 7), (3, 4, 3)),  # q = 3, batched
    ((2, 5, 9), (2, 3, 4)),  # q = 4: the loop with q at run time
    ((1, 3000), (2, 1)),  # 16-bit: a row of 3000 entries narrowed in runs of 1024
    ((2, 3, 1), (2, 1, 1100)),  # n = p = 1 and q above a 16-bit run
    ((3, 7001, 1), (3, 1, 3)),  # n = p = 1: a column times a row, the batch entry's rows as one; threads cut
    ((3, 5, 1), (3, 2001, 2)),  # threads cut rows inside a batch entry and inside A's row (the counters' start)
    ((0, 4, 1), (0, 1, 5)),  # empty batch
    ((2, 0, 1), (2, 1, 3)),  # empty rows
])
def test_kron_cpu_short_rows_route_exact(dtype, shapes):
    """kron's CPU loop: runs of q = 1, 2, 3 with q fixed at compile time, a column times a row (n = p = 1,
    per_sample_grad_linear's outer products) as one row per batch entry, the row positions counted along (not
    divided out) from where a thread's cut begins. Each element is one product rounded once: exact, with 1 and
    2 threads, for contiguous and transposed inputs."""
    gen = torch.Generator().manual_seed(0)
    A = torch.randn(*shapes[0], generator=gen).to(dtype)
    B = torch.randn(*shapes[1], generator=gen).to(dtype)
    expected = ref.kron(A.double(), B.double()).to(dtype)
    A_t = A.mT.contiguous().mT  # same values, non-contiguous
    threads = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            for a, b in ((A, B), (A_t, B), (A, B.mT.contiguous().mT)):
                got = linalg.kron(a, b)
                assert got.shape == expected.shape
                torch.testing.assert_close(got, expected, atol=0, rtol=0, msg=f"{n} threads")
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("batch,n_in,n_out", [(256, 16, 1024), (3, 1, 1), (5, 1, 300), (5, 300, 1), (2, 1100, 3),
                                              (0, 4, 5), (4, 0, 5), (7, 2, 3)])
def test_per_sample_grad_linear_cpu_short_rows_route_exact(dtype, batch, n_in, n_out):
    """per_sample_grad_linear's outer products on the CPU (a column times a row: one row per batch entry in
    kron's loop): exactly the reference's products, with 1 and 2 threads, for contiguous and strided inputs."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, n_in, generator=gen).to(dtype)
    g = torch.randn(batch, n_out, generator=gen).to(dtype)
    want_w, want_b = ref.per_sample_grad_linear(x, g, True)
    threads = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            for xs, gs in ((x, g), (x.T.contiguous().T, g.T.contiguous().T)):
                got_w, got_b = linalg.per_sample_grad_linear(xs, gs, True)
                torch.testing.assert_close(got_w, want_w, atol=0, rtol=0, msg=f"{n} threads")
                torch.testing.assert_close(got_b, want_b, atol=0, rtol=0)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("n", [128, 384])
@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("p", [2, 4])
def test_inverse_root_auto_cpu_eigh_route_float32_accurate_at_cond_1e5(batch, p, n):
    """"auto" takes float32 matrices of n >= 128 on the CPU to eigh for speed. In float32, eigh's roots at cond 1e5
    were 2e-3 to 9e-3 off (n = 128 to 512), less accurate than the iteration (4e-4 to 5e-3); it runs in float64
    (2e-8 off), about as fast as the iteration (n = 128: 2.3 against 1.7 ms, n = 384: 26 against 46, one thread)."""
    gen = torch.Generator().manual_seed(0)
    A = random_spd(n, 1e5, batch=batch, dtype=torch.float32, generator=gen)
    X, residual = linalg.matrix_inverse_root(A, p, return_residual=True)
    assert X.dtype == torch.float32 and X.shape == A.shape
    assert rel_err(X, ref.matrix_inverse_root(A.double(), p, 1e-6)) < 1e-6
    assert torch.equal(residual, torch.zeros(batch))


def test_inverse_root_auto_cpu_route_by_dtype():
    """CPU "auto" sent every matrix of n >= 64 (batches n >= 128) to eigh, whatever its dtype. Float32 n = 64-96:
    the iteration is 1.1-2.3x faster than that route and 10-20x more accurate at cond 1e5 (eigh 1.3e-3 to 4.5e-3
    off); float64 batches of n = 64-96: eigh is 1.6-3.3x faster than the iteration (session 47, 1 and 2 threads).
    The route shows in the residual: the iteration's (> 0), or 0 where eigh alone ran."""
    gen = torch.Generator().manual_seed(0)
    A = random_spd(64, 1e5, dtype=torch.float32, generator=gen)
    X, residual = linalg.matrix_inverse_root(A, 2, return_residual=True)
    assert residual.item() > 0, "float32 n = 64 went to eigh"
    assert rel_err(X, ref.matrix_inverse_root(A.double(), 2, 1e-6)) < 1e-3
    B = random_spd(96, 1e3, batch=(3,), generator=gen)  # float64
    X, residual = linalg.matrix_inverse_root(B, 4, return_residual=True)
    assert torch.equal(residual, torch.zeros(3)), "a float64 batch of n = 96 stayed on the iteration"
    assert rel_err(X, ref.matrix_inverse_root(B, 4, 1e-6)) < 1e-10
