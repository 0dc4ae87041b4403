"""Second-order optimizer kernels: matrix inverse roots, Kronecker products, per-sample
gradients, and a Shampoo optimizer built on them.

Ops (CPU and CUDA): matrix_inverse_root (float32, float64), kron and per_sample_grad_linear
(float32, float64, float16, bfloat16; products of half types are formed in float32).
Python helpers: per_sample_grads, memory_info, Shampoo.
"""
import contextlib
import math
import numbers
import os
from collections.abc import Callable

import torch
from torch import nn

NAMESPACE: str  # the build's op namespace, set by loader.py before this file runs
register_autograd: Callable  # loader.register_autograd, set beside it: torch.library.register_autograd's
                             # signature at a fraction of its load time
register_batch_dim_vmap: Callable  # loader.register_batch_dim_vmap: the vmapped dimension as a batch dimension
load_reference: Callable     # this family's reference.py, imported on the first call
check_numbers: Callable      # loader.check_numbers: refuses a float argument given as a tensor with a derivative
_ops = getattr(torch.ops, NAMESPACE)

__all__ = ["matrix_inverse_root", "kron", "per_sample_grad_linear", "per_sample_grads", "memory_info", "Shampoo"]

# Converged when residual <= rtol * sqrt(n) (residual: ||M - I||_F before the last step,
# which roughly squares it). Tuned on random SPD input: converged float32 runs sit ~10x below.
_RESIDUAL_RTOL = {torch.float32: 5e-3, torch.float64: 1e-5}


def _no_sync_wanted(A: torch.Tensor) -> bool:
    """Inside torch.compile tracing or CUDA graph capture a host sync is impossible, and meta and fake tensors
    have no values to read (the default fallback raised on them until session 40). torch.jit.trace would record
    one input's host-side choice for every input (a fixed count of re-rooted matrices: other counts raised)."""
    if torch.compiler.is_compiling() or torch.jit.is_tracing() or A.is_meta \
            or isinstance(A, torch._subclasses.fake_tensor.FakeTensor):
        return True
    return A.is_cuda and torch.cuda.is_current_stream_capturing()


def _check_arguments(A: torch.Tensor, p, eps, max_cond) -> None:
    """The op's argument checks alone (on a meta copy of A: no work, no sync), for the routes that skip it. What
    is no tensor goes as it is, for the op to refuse by name (None: "A must be a tensor, got None")."""
    _ops.matrix_inverse_root(A.to("meta") if isinstance(A, torch.Tensor) else A, p, eps, float(max_cond or 0.0))


def _eigh_is_faster(A) -> bool:
    """On the CPU LAPACK's eigh (with this route's checks) beats the iteration's matrix products from n = 128 in
    float32 and from n = 64 in float64, for one matrix or a batch (eigh takes them one at a time). Float32, 1 and 2
    threads (session 47): n = 64 650-674 vs 304-404 us, n = 96 748-771 vs 614-692, n = 128 1181-1242 vs
    1130-1487; 16 x n=64 3.4-4.6 vs 2.1-3.3 ms; 4 x n=128 4.4 vs 6.6 ms, 4 x n=256 18 vs 47 ms, 2 x n=512 54 vs
    182 ms (session 45). Float64: n = 64 0.62-0.64 vs 1.3-2.2 ms, 16 x n=64 6.5-7.9 vs 12.8-21.7 ms, 4 x n=96
    3.1-3.5 vs 6.3-11.7 ms, 4 x n=256 33 vs 216 ms. Until session 47 one matrix went from n = 64 and batches from
    n = 128 whatever the dtype: float32 n = 64-127 took the slower route, and the less accurate one (cond 1e5:
    eigh 1.3e-3 to 4.5e-3 off, the iteration 1.2e-4 to 2.5e-4), and float64 batches of n = 64-127 the slower one.
    (These float32 times are float32 eigh's; the route now runs float32 in float64, for accuracy, which costs
    up to 1.35x the iteration's time at n = 128-191 and about its time from n = 192: matrix_inverse_root.)
    Not when A
    needs a gradient: eigh's own backward fails on equal eigenvalues, where the op's does not. Not where
    "auto" acts as "never" (_no_sync_wanted): the route reads A's finiteness on the host. That is asked before n is
    compared: under torch.compile and torch.export the comparison guarded a symbolic n (a graph more past n = 64,
    and export refused a dynamic n beyond 63)."""
    return (isinstance(A, torch.Tensor) and A.device.type == "cpu" and A.dim() >= 2 and not _no_sync_wanted(A)
            and A.shape[-1] >= (64 if A.dtype == torch.float64 else 128)
            and not (A.requires_grad and torch.is_grad_enabled()))


def _check_finite(A: torch.Tensor) -> None:
    if not torch.isfinite(A).all():
        raise ValueError("A contains NaN or Inf: its inverse root is undefined")


def _check_root_finite(X: torch.Tensor, eps: float) -> None:
    """After the eigh routes, which root max(l, 0) + eps: inf for eps = 0 and a singular A (it came out silently)."""
    if not torch.isfinite(X).all():
        raise ValueError(f"the inverse root of A + eps I is not finite (eps={eps}): A + eps I is singular (eps = 0 "
                         f"and A singular), or A's entries overflow its dtype in A + Aᵀ. Pass eps > 0")


def _eigh_inverse_root(A: torch.Tensor, p: int, eps: float) -> torch.Tensor:
    """The eigh routes' root, differentiated as the op is (Daleckii-Krein, _matrix_inverse_root_backward): eigh's own
    backward is NaN where eigenvalues repeat (A = I) and was off by 2 for 2I + vvᵀ (session 52's review)."""
    return _EighInverseRoot.apply(A, p, eps)


class _EighInverseRoot(torch.autograd.Function):
    generate_vmap_rule = True  # the "auto" route's torch.func branch runs it under vmap

    @staticmethod
    def forward(A, p, eps):
        return _eigh_inverse_root_values(A, p, eps)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.p, ctx.eps, ctx.clamp = inputs[1], inputs[2], True

    @staticmethod
    def backward(ctx, grad_X):
        return _matrix_inverse_root_backward(ctx, grad_X, None)[:3]


def _eigh_inverse_root_values(A: torch.Tensor, p: int, eps: float) -> torch.Tensor:
    S = (A + A.mT) / 2
    # Entries above half the dtype's largest overflow in A + Aᵀ. LAPACK's eigh then raised "failed to
    # converge" (CPU, n = 3..16) or returned NaN or, for n = 1, a root of 0: give NaN, as the iteration does.
    # Checked per matrix on the device (no host sync, no data-dependent branch for torch.func).
    finite = S.isfinite().all(-1, keepdim=True).all(-2, keepdim=True)
    L, V = torch.linalg.eigh(torch.where(finite, S, torch.eye(S.shape[-1], dtype=S.dtype, device=S.device)))
    # In A's dtype, as the op's route, also under autocast (which ran this product in bfloat16; meta has none)
    with torch.autocast(A.device.type, enabled=False) if A.device.type != "meta" else contextlib.nullcontext():
        X = (V * (L.clamp_min(0) + eps).pow(-1.0 / p).unsqueeze(-2)) @ V.mT
    return torch.where(finite, X, float("nan"))


def matrix_inverse_root(A: torch.Tensor, p: int = 4, eps: float = 1e-6, *, max_cond: float | None = None,
                        fallback: str = "auto", return_residual: bool = False):
    """(A + eps I)^(-1/p) for symmetric positive semi-definite A of shape (n, n) or (..., n, n).
    Only the symmetric part (A + Aᵀ)/2 is used (on every route), so rounding asymmetry is harmless.

    A scaled coupled Newton iteration (Guo & Higham 2006) built on matrix products, with a
    step count fixed by (p, max_cond, dtype): no host sync, CUDA-graph capturable.
    dtypes: float32 and float64, TF32 never used. Float32 products on CUDA run on the bfloat16
      tensor cores: each factor is split into 3 bfloat16 pieces and the 6 piece products above
      float32's rounding are summed in float32 (about float32 accuracy, ~2-3x float32 cuBLAS's speed).
      On CUDA, matrices of n <= 64 take the whole iteration in one kernel, a block per matrix, with
      the products in the input's dtype (on the H200, 17-125 us in float32 and 40-311 us in float64, where
      the general route's launches took ~1.2 ms); on the CPU, a batch of little work (nb * n^3 <= 32^3) a
      thread per matrix.
    p: integer in [1, 32].
    max_cond: the largest cond(A + eps I) * ||A||_F / ||A||_2 the fixed step count is built for
      (default 1e5 in float32, 1e12 in float64); larger input converges only partly.
    fallback: "auto" checks each matrix's residual on the host (one sync) and recomputes the
      ones that did not converge with eigh; it raises ValueError if A holds NaN or Inf. Under
      torch.compile, torch.jit.trace or CUDA graph capture "auto" acts as "never"; under torch.func (vmap) it
      recomputes with eigh but raises nothing (no host sync: NaN input gives NaN). "never": no check, no sync
      (non-finite input gives NaN). "always": eigh only (the slow route on the GPU).
      On the CPU, "auto" takes float64 matrices of n >= 64 and float32 ones of n >= 128 (one or a batch) that
      need no gradient straight to eigh, which is faster there (2-6x at n = 256), float32 ones in float64
      (float32 eigh's roots were up to 1e-2 off at cond 1e5, less accurate than the iteration).
    Diagonal matrices (n = 1, A = I) are computed exactly, elementwise.
    Negative eigenvalues (A not quite PSD after rounding): the eigh routes and reference.py clamp them at 0;
      the Newton iteration roots A + eps I as it is, so an eigenvalue in (-eps, 0) gives a larger root there,
      and one below -eps inf/NaN with fallback="never" ("auto" then recomputes it with eigh).
    Float32 entries above ~1.7e38 (half of float32's largest) overflow in A + Aᵀ, and eps = 0 with a singular A has
      no root: "auto" and "always" raise ValueError, "never" gives NaN or inf.
    Differentiable in A on every route (Daleckii-Krein's formula, from an eigh in backward: exact for symmetric A,
      repeated eigenvalues included; slower than forward).
    Returns X, or (X, residual) with residual = ||M - I||_F per matrix if return_residual: the
      iteration's, also for matrices "auto" then recomputed with eigh; 0 where eigh alone ran ("always",
      and the CPU's large-matrix "auto" route above).
    """
    check_numbers(eps=eps, max_cond=max_cond)
    if isinstance(p, bool):  # an int to Python and to the op's schema: p=True took the inverse (session 52's review)
        raise TypeError(f"p must be an integer in [1, 32], got bool {p}")
    if fallback not in ("auto", "never", "always"):
        raise ValueError(f"fallback must be 'auto', 'never' or 'always', got {fallback!r}")
    in_float64 = False
    if fallback == "auto" and _eigh_is_faster(A):
        fallback = "always"
        # Float32 eigh's roots at cond 1e5 were 2e-3 to 9e-3 off (n = 128 to 512; the iteration's 4e-4 to 5e-3); in
        # float64 2e-8 off, as fast as the iteration from n = 192 (one thread: n = 192 6.2 against 6.4 ms, n = 256
        # 12.3 against 13.8, n = 384 26 against 46; n = 128 2.3 against 1.7; float32 eigh 1.6-2x faster; session 47)
        in_float64 = A.dtype == torch.float32
    if fallback == "always":  # the argument checks and the finiteness check of the other routes (session 40)
        if not torch.compiler.is_compiling():  # a None A raised AttributeError ("'NoneType' object has no ...")
            _check_arguments(A, p, eps, max_cond)
        checked = not _no_sync_wanted(A) and not torch._C._are_functorch_transforms_active()
        if checked:
            _check_finite(A)
        X = _eigh_inverse_root(A.double(), p, eps).to(A.dtype) if in_float64 else _eigh_inverse_root(A, p, eps)
        if checked:
            _check_root_finite(X, eps)
        residual = A.new_zeros(A.shape[:-2])
        return (X, residual) if return_residual else X
    X, residual = _ops.matrix_inverse_root(A, p, eps, float(max_cond or 0.0))
    if fallback == "auto" and not _no_sync_wanted(A) and A.numel() > 0:
        bad = ~(residual <= _RESIDUAL_RTOL[A.dtype] * math.sqrt(A.shape[-1]))  # NaN counts as bad
        # and an inf root: the exact route of diagonal matrices gave inf, residual 0, for a zero diagonal with eps = 0
        bad = bad | ~X.isfinite().flatten(-2).all(-1)
        if torch._C._are_functorch_transforms_active():
            # torch.func (vmap) allows no data-dependent branch: eigh on every matrix, kept where bad. The
            # others give eigh a matrix of distinct eigenvalues, so its backward stays finite (where's
            # untaken side still carries a gradient of 0 x that backward).
            n = A.shape[-1]
            distinct = torch.diag(torch.arange(1, n + 1, dtype=A.dtype, device=A.device))
            on_eigh = torch.where(bad[..., None, None], A, distinct)
            X = torch.where(bad[..., None, None], _eigh_inverse_root(on_eigh, p, eps).to(X.dtype), X)
        elif bad.any():  # the one host sync of this path
            _check_finite(A)
            if A.dim() == 2:
                X = _eigh_inverse_root(A, p, eps)
            else:
                idx = bad.nonzero(as_tuple=True)
                X = X.clone()
                X[idx] = _eigh_inverse_root(A[idx], p, eps).to(X.dtype)
            _check_root_finite(X, eps)
    return (X, residual) if return_residual else X


def _matrix_inverse_root_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])
    # The residual is a diagnostic with no derivative here: a constant, as on the eigh route (it required grad,
    # and a loss on it gave A zeros in silence: session 45's derivative review)
    ctx.mark_non_differentiable(output[1])
    ctx.p, ctx.eps, ctx.clamp = inputs[1], inputs[2], False


def _matrix_inverse_root_backward(ctx, grad_X, grad_residual):
    # Daleckii-Krein: for A = V diag(l) V^T and f(l) = (l + eps)^(-1/p),
    # dA = V (F o (V^T dX V)) V^T with F_ij = (f_i - f_j) / (l_i - l_j), f'(l_i) on the diagonal.
    (A,) = ctx.saved_tensors
    p, eps = ctx.p, ctx.eps
    if A.shape[-1] == 0:  # matrices of n = 0: nothing to differentiate
        return torch.zeros_like(A), None, None, None
    L, V = torch.linalg.eigh((A + A.mT) / 2)  # the forward uses only the symmetric part
    # The eigh routes root max(l, 0) + eps (ctx.clamp): f is flat below 0 there, as is its divided difference
    # between two clamped eigenvalues.
    C = L.clamp_min(0) if ctx.clamp else L
    shifted = C + eps
    f = shifted.pow(-1.0 / p)
    df = -f / (p * shifted)
    if ctx.clamp:
        df = torch.where(L < 0, 0.0, df)
    dl = L.unsqueeze(-1) - L.unsqueeze(-2)
    dc = C.unsqueeze(-1) - C.unsqueeze(-2)
    # Equal within 1e-9 of the pair's own size (of the largest eigenvalue until session 45: a covariance's 1e-10 and
    # 1e-11 counted as equal beside an eigenvalue of 1, and their gradient took f' for the divided difference)
    same = dl.abs() <= 1e-9 * torch.maximum(L.abs().unsqueeze(-1), L.abs().unsqueeze(-2)).clamp_min(1e-30)
    mid = (df.unsqueeze(-1) + df.unsqueeze(-2)) / 2
    dl = torch.where(same, torch.ones_like(dl), dl)
    # f_i - f_j = f_j ((1 + dc_ij / shifted_j)^(-1/p) - 1), through log1p and expm1: the difference of the
    # rounded f values cancelled for close eigenvalues (float32 gradients of I + a small PSD part were up to
    # 67% off). Where shifted_i < shifted_j / 2, log1p's argument nears -1 (it rounded to -1, -inf, once their ratio
    # was below the dtype's eps: NaN gradients for float32 diag(1e3, 1, 1e-9)): there -log(shifted_j / shifted_i),
    # through log1p of the transposed argument (>= 1). The untaken sides get 0 (finite double backward).
    x = dc / shifted.unsqueeze(-2)
    keep = x > -0.5
    log_ratio = torch.where(keep, torch.log1p(torch.where(keep, x, 0.0)), -torch.log1p(torch.where(keep, 0.0, x.mT)))
    f_diff = f.unsqueeze(-2) * torch.expm1(log_ratio * (-1.0 / p))
    F = torch.where(same, mid, f_diff / dl)
    grad_A = V @ (F * (V.mT @ grad_X @ V)) @ V.mT
    return (grad_A + grad_A.mT) / 2, None, None, None


register_autograd(f"{NAMESPACE}::matrix_inverse_root", _matrix_inverse_root_backward,
                  setup_context=_matrix_inverse_root_setup)


def kron(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Kronecker product of A (m, n) and B (p, q): (m*p, n*q), or per batch entry for
    A (..., m, n), B (..., p, q) with equal batch dims. The output is written once, coalesced.

    dtypes: float32, float64, float16, bfloat16. Differentiable in A and B.
    """
    return _ops.kron(A, B)


def _kron_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])


def _kron_backward(ctx, grad):
    A, B = ctx.saved_tensors
    (m, n), (p, q) = A.shape[-2:], B.shape[-2:]
    # G[..., i, k, j, l] is the gradient of out[..., i*p + k, j*q + l] = A[i, j] B[k, l]. Each gradient is a batched
    # matrix-vector product over G's contiguous (n, q) blocks (one read of G), then a short sum: accumulated in
    # float32 for 16-bit grads, after the products are rounded to the grad's dtype. Not einsum: torch's legacy vmap
    # (autograd.grad(is_grads_batched=True), gradcheck's batched check) has no einsum rule, and that raised (session
    # 53's review).
    G = grad.reshape(*grad.shape[:-2], m, p, n, q)
    acc = torch.float32 if grad.dtype in (torch.float16, torch.bfloat16) else grad.dtype
    grad_A = grad_B = None
    if ctx.needs_input_grad[0]:  # sum over k of (sum over l of G[i, k, j, l] B[k, l])
        grad_A = torch.matmul(G, B[..., None, :, :, None]).squeeze(-1).sum(-2, dtype=acc).to(grad.dtype)
    if ctx.needs_input_grad[1]:  # sum over i of (sum over j of A[i, j] G[i, k, j, l])
        grad_B = torch.matmul(A[..., :, None, None, :], G).squeeze(-2).sum(-3, dtype=acc).to(grad.dtype)
    return grad_A, grad_B


register_autograd(f"{NAMESPACE}::kron", _kron_backward, setup_context=_kron_setup,
                  forward_formula=lambda value, A, B: load_reference().kron(A, B))


for _name in ("matrix_inverse_root", "kron"):  # vmap: one call on (N, ..., m, n), not one per sample
    register_batch_dim_vmap(f"{NAMESPACE}::{_name}")


def per_sample_grad_linear(x: torch.Tensor, grad_out: torch.Tensor, with_bias: bool = True):
    """Per-sample gradients of a Linear layer y = x W^T + b from its input x (B, in) and the
    gradient of the summed per-sample losses at its output, grad_out (B, out).

    Returns (grad_weight (B, out, in), grad_bias (B, out) or None if not with_bias); the
    weight gradients are outer products, written once. dtypes: float32, float64, float16,
    bfloat16. Differentiable in x and grad_out.
    """
    grad_w, grad_b = _ops.per_sample_grad_linear(x, grad_out, with_bias)
    return grad_w, (grad_b if with_bias else None)


def _per_sample_grad_linear_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.with_bias = inputs[2]


def _per_sample_grad_linear_backward(ctx, grad_w, grad_b):
    x, g = ctx.saved_tensors
    # batched matrix-vector products (bmm), not einsum: see _kron_backward
    grad_x = torch.matmul(g.unsqueeze(-2), grad_w).squeeze(-2) if ctx.needs_input_grad[0] else None
    grad_g = None
    if ctx.needs_input_grad[1]:
        grad_g = torch.matmul(grad_w, x.unsqueeze(-1)).squeeze(-1)
        if ctx.with_bias and grad_b is not None:
            grad_g = grad_g + grad_b
    return grad_x, grad_g, None


register_autograd(f"{NAMESPACE}::per_sample_grad_linear", _per_sample_grad_linear_backward,
                  setup_context=_per_sample_grad_linear_setup,
                  forward_formula=lambda value, x, grad_out, with_bias: load_reference().per_sample_grad_linear(
                      x, grad_out, with_bias))


# ---------------------------------------------------------------- per-sample gradients of a model

def per_sample_grads(model: nn.Module, loss_fn, inputs: torch.Tensor, targets: torch.Tensor) -> dict:
    """Gradient of loss_fn(model(inputs[i:i+1]), targets[i:i+1]) for every sample i, as a
    dict parameter name -> (B, *param.shape), for the parameters that require grad.

    nn.Linear layers (batch-first inputs; nn.Linear's own forward, not a subclass's) use one forward
    and two backwards of the whole batch (the second checks that each Linear's rows are the samples'
    own) and the per_sample_grad_linear kernel; any other parameter, and a Linear whose rows are not
    per sample (tokens flattened to (B * T, in), a Linear of a parameter) or that runs inside a
    torch.compile'd module, uses torch.func (vmap of grad over samples, via functional_call on the
    same model: nothing is rebuilt). The model must treat samples independently (eval-mode
    BatchNorm, no cross-sample layers): BatchNorm on batch statistics is refused (ValueError naming it).
    Dropout in training mode: the Linear route's gradients are those of the batch forward's masks; a model whose
    other parameters need torch.func, which cannot repeat them, is refused (RuntimeError: call model.eval()).
    """
    if torch.is_inference_mode_enabled():
        # Autograd records nothing under torch.inference_mode (the Linear route raised from the inference tensors'
        # version counters; torch 2.11's torch.func.grad returned zeros there): the work runs outside it, on
        # normal copies of inputs made in it.
        with torch.inference_mode(False):
            inputs, targets = (t.clone() if isinstance(t, torch.Tensor) and t.is_inference() else t
                               for t in (inputs, targets))
            return per_sample_grads(model, loss_fn, inputs, targets)
    for mod_name, mod in model.named_modules():
        # Batch statistics mix the samples: torch.func then failed with "... in-place operation (aten::add_.Tensor)
        # that would mutate a captured Tensor" or "Expected more than 1 value per channel" (until session 46)
        if isinstance(mod, nn.modules.batchnorm._BatchNorm) and (mod.training or mod.running_mean is None):
            where = f"model.{mod_name}" if mod_name else "model"
            raise ValueError(f"per_sample_grads: {where} ({type(mod).__name__}) normalizes by batch statistics "
                             f"(training mode, or no running statistics), which mix the samples: per-sample gradients "
                             f"are not defined. Call model.eval() (with track_running_stats=True) first.")
    params = {name: p for name, p in model.named_parameters() if p.requires_grad}
    linears = {}  # module -> its parameter names (that require grad)
    for mod_name, mod in model.named_modules():
        # nn.Linear's own forward only: a subclass's (StyleGAN's equalized-lr weight * c, QAT's fake-quantized
        # weight) made the outer products wrong by its transform (until session 45): such modules take torch.func
        if isinstance(mod, nn.Linear) and getattr(mod.forward, "__func__", None) is nn.Linear.forward:
            prefix = f"{mod_name}." if mod_name else ""
            names = {kind: prefix + kind for kind in ("weight", "bias")
                     if getattr(mod, kind) is not None and prefix + kind in params}
            if names:
                linears[mod] = names
    calls, outputs = _linear_calls(model, inputs, linears) if linears else ([], None)
    if not calls:  # no Linear's forward ran (MultiheadAttention reads its out_proj's weight itself): torch.func
        linears = {}
    linear_names = {name for names in linears.values() for name in names.values()}
    result = {}

    if linears:
        with torch.enable_grad():
            # The model's output may be a tuple or dict of batched tensors (loss_fn gets it as the model gave it)
            losses = torch.func.vmap(lambda o, t: loss_fn(torch.utils._pytree.tree_map(lambda a: a.unsqueeze(0), o),
                                                          t.unsqueeze(0)))(outputs, targets)
        # A Linear's parameter that the graph also reaches outside its calls (a tied embedding, a direct
        # use in forward) would lose those terms here: such parameters go to torch.func below.
        shared = _used_outside_calls(losses, linears, calls, params)
        batch = inputs.shape[0]
        with torch.enable_grad():
            grads_out = torch.autograd.grad(losses.sum(), [out for _, _, out in calls], allow_unused=True,
                                            retain_graph=True)
        # A Linear whose rows are not the samples' own would get the wrong outer products: to torch.func too. So
        # does one whose recorded output the losses' graph does not reach: in a torch.compile'd model the gradient
        # flows through the compiled function, not through that tensor (every gradient came out 0 until session 45).
        unreached = {mod for (mod, _, _), g in zip(calls, grads_out) if g is None}
        for mod in _calls_mixing_samples(losses, calls, grads_out, batch) | unreached:
            shared |= set(linears[mod].values())
        if shared:
            linears = {mod: {k: n for k, n in names.items() if n not in shared} for mod, names in linears.items()}
            linear_names -= shared
        for (mod, x, out), g in zip(calls, grads_out):
            names = linears[mod]
            if g is None or not names:
                continue
            x = x.detach()
            if x.dim() == 2:
                gw, gb = per_sample_grad_linear(x, g, with_bias="bias" in names)
            else:  # (B, ..., in): sum the outer products over the inner positions
                gw = torch.einsum("b...o,b...i->boi", g, x)
                gb = g.reshape(batch, -1, g.shape[-1]).sum(1) if "bias" in names else None
            for kind, value in (("weight", gw), ("bias", gb)):
                if kind in names:
                    name = names[kind]
                    value = value.to(params[name].dtype)  # autocast's 16-bit x and g: p.grad's dtype is p's
                    result[name] = value if name not in result else result[name] + value
        for names in linears.values():  # layers the forward never reached
            for name in names.values():
                result.setdefault(name, torch.zeros(batch, *params[name].shape, dtype=params[name].dtype,
                                                    device=params[name].device))

    others = {name: p.detach() for name, p in params.items() if name not in linear_names}
    if others:
        def loss_one(other_params, x, t):
            out = torch.func.functional_call(model, other_params, (x.unsqueeze(0),), strict=False)
            return loss_fn(out, t.unsqueeze(0))

        try:
            result.update(torch.func.vmap(torch.func.grad(loss_one), in_dims=(None, 0, 0))(others, inputs, targets))
        except RuntimeError as e:  # torch's message asked for vmap's randomness flags, of a vmap the caller never called
            if "randomness" not in str(e):
                raise
            raise RuntimeError(f"per_sample_grads: the model draws random numbers (Dropout in training mode?), and "
                               f"{sorted(others)} take a forward per sample (torch.func), which cannot repeat the "
                               f"batch forward's draws. Call model.eval() first (a model of nn.Linear parameters alone "
                               f"gets the batch forward's dropout masks).") from e
    return {name: result[name] for name in params}


def _linear_calls(model, inputs, linears):
    """[(module, input, output)] for every call of a Linear in one forward of the batch, and the model's
    output. A later in-place op on a call's output (nn.ReLU(inplace=True)) or input would change the tensor
    kept here, and with it the gradient taken there (session 40's review: 3.6 off): then the forward runs
    again with the module's output and the kept input copied, so the in-place ops change the copies."""
    def run(copy):
        calls, versions = [], []

        def hook(mod, args, kwargs, out):
            if not out.requires_grad:  # a call under torch.no_grad: no gradient flows from it (autograd.grad raised)
                return None
            x = args[0] if args else kwargs["input"]  # lin(x) or lin(input=x)
            x = x.detach().clone() if copy else x
            calls.append((mod, x, out))
            versions.append((x._version, out._version))
            return out.clone() if copy else None

        # prepend: before the user's forward hooks, which may change the output (o * 2 halved the gradients)
        handles = [mod.register_forward_hook(hook, with_kwargs=True, prepend=True) for mod in linears]
        try:
            with torch.enable_grad():
                outputs = model(inputs)
        finally:
            for h in handles:
                h.remove()
        changed = any((x._version, out._version) != v for (_, x, out), v in zip(calls, versions))
        return calls, outputs, changed

    calls, outputs, changed = run(copy=False)
    if changed:
        calls, outputs, _ = run(copy=True)
    return calls, outputs


def _calls_mixing_samples(losses, calls, grads_out, batch) -> set:
    """Modules with a call whose output row r is not sample r's alone (the outer products per row are then
    not per-sample gradients): rows other than the batch's (tokens flattened to (B * T, in)), or a row that
    other samples' losses reach (a Linear of a parameter). Found by one more backward, of the
    losses weighted by powers of two: where row r reaches loss r alone, its gradient is exactly the
    weight times the unweighted one (a power of two scales without rounding)."""
    mixed = {mod for (mod, x, out), g in zip(calls, grads_out)
             if g is not None and (out.dim() == 0 or out.shape[0] != batch or x.shape[0] != batch)}
    probed = [i for i, ((mod, _, _), g) in enumerate(zip(calls, grads_out)) if g is not None and mod not in mixed]
    if batch < 2 or not probed:
        return mixed
    weights = 2.0 ** (torch.arange(batch, device=losses.device) % 5 - 2).to(losses.dtype)
    with torch.enable_grad():
        per_sample_weights = weights.view(-1, *([1] * (losses.dim() - 1)))
        weighted = torch.autograd.grad((losses * per_sample_weights).sum(), [calls[i][2] for i in probed],
                                       allow_unused=True)
    for i, g_weighted in zip(probed, weighted):
        g = grads_out[i]
        expected = g * weights.to(g.dtype).view(-1, *([1] * (g.dim() - 1)))
        # a little slack for sums in a nondeterministic order (atomics), far below any real cross-sample term
        slack = 8 * torch.finfo(g.dtype).eps * expected.abs().amax()
        if g_weighted is None or (g_weighted - expected).abs().amax() > slack:
            mixed.add(calls[i][0])
    return mixed


def _used_outside_calls(losses, linears, calls, params) -> set:
    """Names of Linear parameters that the graph of `losses` reaches by more edges than their module's
    calls made (one edge a call): a weight tied to an embedding, or read directly in forward."""
    edges, seen, stack = {}, set(), [losses.grad_fn]
    while stack:
        node = stack.pop()
        for successor, _ in node.next_functions:
            if successor is not None:
                edges[successor] = edges.get(successor, 0) + 1
                if successor not in seen:
                    seen.add(successor)
                    stack.append(successor)
    n_calls = {}
    for mod, _, _ in calls:
        n_calls[mod] = n_calls.get(mod, 0) + 1
    shared = set()
    for mod, names in linears.items():
        for name in names.values():
            p = params[name]
            with torch.enable_grad():  # under torch.no_grad the view had no grad_fn (AttributeError until session 45)
                accumulate = p.view_as(p).grad_fn.next_functions[0][0]  # the leaf's node in the graph
            if edges.get(accumulate, 0) > n_calls.get(mod, 0):
                shared.add(name)
    return shared


def memory_info(device=None) -> dict:
    """Bytes of memory on `device` (default: the current CUDA device, else the CPU):
    total and free (from the CUDA driver; for the CPU from /proc/meminfo), and PyTorch's
    caching allocator's reserved and allocated bytes (0 on the CPU)."""
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        return {"total": total, "free": free, "reserved": torch.cuda.memory_reserved(device),
                "allocated": torch.cuda.memory_allocated(device)}
    if device.type != "cpu":
        raise ValueError(f"device must be cpu or cuda, got {device}")
    page = os.sysconf("SC_PAGE_SIZE")
    total, free = os.sysconf("SC_PHYS_PAGES") * page, os.sysconf("SC_AVPHYS_PAGES") * page
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    free = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {"total": total, "free": free, "reserved": 0, "allocated": 0}


# ---------------------------------------------------------------- Shampoo

class Shampoo(torch.optim.Optimizer):
    """Shampoo (Gupta et al. 2018) with Adam grafting (Anil et al. 2020).

    For a parameter with 2 or more dims, viewed as a matrix G (shape[0], rest), split into
    blocks of at most block_size x block_size: left and right statistics L = EMA(G G^T),
    R = EMA(G^T G) per block (decay betas[1]); every update_freq steps their inverse 4th
    roots are recomputed, all blocks of all parameters at once (one batched
    matrix_inverse_root call per distinct block size; one call when all blocks are equal).
    The direction L^(-1/4) m R^(-1/4) (m: Adam's first moment, bias-corrected) is grafted to
    Adam's step size: rescaled per parameter to the norm of Adam's direction. 1-D parameters
    (biases, norms) take Adam's step (the diagonal fallback). Weight decay is decoupled (AdamW).
    Complex parameters and sparse gradients are refused (RuntimeError naming the parameter's place).

    root_eps: regularization relative to each statistic's size: (S/||S||_F + root_eps I)^(-1/4)
      ||S||_F^(-1/4), which bounds the condition number by 1/root_eps, so the fixed Newton step
      count always converges (no host sync in step()). A statistic of zeros (no gradient yet) keeps the identity.
      root_eps is at least the statistics' dtype's eps (float32, also for 16-bit parameters: 1.19e-7), on both
      routes: a float32 statistic's rounding gives it eigenvalues down to about -1.5e-8 of its norm, which the
      Newton iteration cannot clamp as eigh does (root_eps = 1e-12 gave NaN parameters, 1e-8 wild roots).
    root_method: "newton" (this family's kernel) or "eigh" (the usual, slow route; for comparison).
    torch.compile: step counts are CPU tensors (as in torch's optimizers), so a compiled step does not recompile as
      they grow (fullgraph=True works); there, torch.cond decides at run time whether to recompute the roots.
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, *, update_freq: int = 1, block_size: int = 1024,
                 root_eps: float = 1e-5, root_method: str = "newton"):
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, update_freq=update_freq,
                        block_size=block_size, root_eps=root_eps, root_method=root_method)
        super().__init__(params, defaults)  # each group (defaults filled in) is checked in add_param_group

    def add_param_group(self, param_group):
        # A group's own settings were not checked, only the constructor's (until session 46): root_method="Newton"
        # in a group ran eigh in silence, betas[1] = 1 gave NaN, block_size=0 raised Python's "range() arg 3 ...".
        settings = {**self.defaults, **param_group}
        where = f"Shampoo param_groups[{len(self.param_groups)}]"
        lr, betas, eps, weight_decay = settings["lr"], settings["betas"], settings["eps"], settings["weight_decay"]
        # betas[1] = 1 passed until session 40: the first step's bias correction divided by 1 - 1 (NaN).
        # not (x >= 0), not x < 0: NaN eps and weight_decay passed and made every parameter NaN (AdamW refuses them)
        # inf eps froze every parameter in silence, inf weight_decay made them inf (session 52's review)
        if not all(math.isfinite(x) and x >= 0 for x in (lr, eps, weight_decay)) or len(betas) != 2 \
                or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"{where}: lr, eps, weight_decay must be finite and >= 0 and betas two numbers in [0, 1), "
                             f"got lr={lr}, betas={tuple(betas)}, eps={eps}, weight_decay={weight_decay}")
        update_freq, block_size, root_eps = settings["update_freq"], settings["block_size"], settings["root_eps"]
        # numbers.Integral: numpy's integers were refused as "must be integers"; a bool (an int to Python) is not one
        if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in (update_freq, block_size)) \
                or update_freq < 1 or block_size < 1 \
                or not 0 < root_eps < 1:
            raise ValueError(f"{where}: update_freq, block_size must be integers >= 1 and root_eps in (0, 1), got "
                             f"update_freq={update_freq!r}, block_size={block_size!r}, root_eps={root_eps}")
        if settings["root_method"] not in ("newton", "eigh"):
            raise ValueError(f"{where}: root_method must be 'newton' or 'eigh', got {settings['root_method']!r}")
        super().add_param_group(param_group)

    @staticmethod
    def _stat_dtype(p):
        return torch.float32 if p.dtype in (torch.float16, torch.bfloat16) else p.dtype

    @staticmethod
    def _blocks(rows, cols, size):
        return [(r, min(r + size, rows), c, min(c + size, cols))
                for r in range(0, rows, size) for c in range(0, cols, size)]

    def _init_state(self, p, group):
        state = self.state[p]
        # A CPU tensor, as in torch's optimizers: torch.compile guarded on a Python int's value (a recompile at every
        # step until session 46). float64: the bias corrections 1 - beta ** step are those of Python floats.
        state["step"] = torch.tensor(0.0, dtype=torch.float64)
        state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        if p.dim() >= 2:
            rows, cols = p.shape[0], math.prod(p.shape[1:])  # (p[0] fails for a parameter of no rows)
            dtype = self._stat_dtype(p)
            blocks = self._blocks(rows, cols, group["block_size"])
            state["L"] = [torch.zeros(r1 - r0, r1 - r0, dtype=dtype, device=p.device) for r0, r1, _, _ in blocks]
            state["R"] = [torch.zeros(c1 - c0, c1 - c0, dtype=dtype, device=p.device) for _, _, c0, c1 in blocks]
            state["PL"] = [torch.eye(r1 - r0, dtype=dtype, device=p.device) for r0, r1, _, _ in blocks]
            state["PR"] = [torch.eye(c1 - c0, dtype=dtype, device=p.device) for _, _, c0, c1 in blocks]

    def __setstate__(self, state):
        # load_state_dict and unpickling end here: a checkpoint from before session 46 holds each step count as a
        # Python int; it becomes the CPU tensor that step() counts in (as torch's Adam converts its old ones). One
        # loaded onto a GPU (torch.load's map_location) goes back to the CPU, where reading it needs no sync.
        super().__setstate__(state)
        for param_state in self.state.values():
            step = param_state.get("step")
            if step is not None and not (torch.is_tensor(step) and step.device.type == "cpu"):
                param_state["step"] = torch.tensor(float(step), dtype=torch.float64)

    def _roots_due(self) -> tuple:
        """For every parameter (in param_groups order): does this step recompute its roots (its step count before
        this step a multiple of update_freq)? Python bools, read from the CPU counts (no device sync). Under
        torch.compile 0-d bool tensors, which _inverse_roots hands to torch.cond: graphs do not depend on the counts."""
        def count(p):  # a parameter's count before this step: eager reads it as a number (a CPU tensor op a
            step = self.state.get(p, {}).get("step")  # parameter cost ~10 us a step each)
            if torch.compiler.is_compiling():
                return torch.zeros((), dtype=torch.float64) if step is None else step
            return 0.0 if step is None else float(step)

        return tuple(count(p) % group["update_freq"] == 0 for group in self.param_groups for p in group["params"])

    def load_state_dict(self, state_dict):
        # torch casts every floating state tensor to its parameter's dtype: a 16-bit parameter's float32
        # statistics and roots came back rounded (no longer PSD: NaN roots, session 43). Those are put back from
        # the saved ones, cast to their own dtype (as torch's cast does, a tensor already of it is kept, not copied).
        super().load_state_dict(state_dict)
        saved_ids = (i for group in state_dict["param_groups"] for i in group["params"])
        for i, p in zip(saved_ids, (p for group in self.param_groups for p in group["params"])):
            saved, dtype = state_dict["state"].get(i, {}), self._stat_dtype(p)
            for key in ("L", "R", "PL", "PR"):
                if key in saved and dtype != p.dtype:
                    self.state[p][key] = [t.to(device=p.device, dtype=dtype) for t in saved[key]]

    @staticmethod
    def _roots_of(S, root_eps, method):
        """Inverse 4th roots of the stacked statistics S (k, n, n), each relative to its size (see root_eps)."""
        frobenius = torch.linalg.matrix_norm(S)[:, None, None]
        norm = frobenius.clamp_min(torch.finfo(S.dtype).tiny)
        # A float32 statistic's rounding leaves eigenvalues down to ~-1.5e-8 of its norm, which the Newton
        # iteration roots as they are: root_eps = 1e-12 gave NaN, 1e-8 roots of ~5e6 (until session 44).
        root_eps = max(root_eps, torch.finfo(S.dtype).eps)
        if method == "newton":
            X = matrix_inverse_root(S / norm, 4, root_eps, max_cond=min(1e16, 1.01 / root_eps + 1), fallback="never")
        else:
            X = _eigh_inverse_root(S / norm, 4, root_eps)
        # A zero statistic (no gradient yet: behind a zero-initialized layer) keeps the identity. Its root,
        # ~5e10 I in float32, overflowed the grafting norms of later steps: no move until the next update.
        return torch.where(frobenius == 0, torch.eye(S.shape[-1], dtype=X.dtype, device=X.device), X * norm.pow(-0.25))

    def _inverse_roots(self, todo):
        """todo: list of (statistic, output list, index, root_eps, method, due). All in one batched call
        per (block size, dtype, device, root_eps, method). due is True in eager mode (todo holds the due ones);
        under torch.compile a 0-d bool tensor for every block: torch.cond computes the roots if any is due,
        torch.where keeps the old root of one that is not."""
        groups = {}
        for stat, out, i, root_eps, method, due in todo:
            key = (stat.shape[0], stat.dtype, stat.device, root_eps, method)
            groups.setdefault(key, []).append((stat, out, i, due))
        for (_, _, _, root_eps, method), items in groups.items():
            S = torch.stack([s for s, _, _, _ in items])
            if not torch.is_tensor(items[0][3]):
                X = self._roots_of(S, root_eps, method)
            else:
                old = torch.stack([out[i] for _, out, i, _ in items])
                due = torch.stack([d for _, _, _, d in items])
                X = torch.cond(due.any(), lambda S, old: self._roots_of(S, root_eps, method),
                               lambda S, old: old.clone(), (S, old))
                # The per-block choice on S's device: inductor handed the CPU flags to a CUDA kernel ("CUDA driver
                # error: invalid argument", session 46 call 1). The predicate above stays on the CPU (no sync).
                due = due.to(S.device)
                X = [torch.where(d, x, o) for d, x, o in zip(due.unbind(0), X.unbind(0), old.unbind(0))]
            for (_, out, i, _), x in zip(items, X):
                out[i] = x

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        # Refused before any state moves (a complex parameter took a wrong 'Adam' step, g * g for |g|^2, or failed
        # in the root after the earlier parameters' moments had moved, until session 45)
        for i, group in enumerate(self.param_groups):
            for j, p in enumerate(group["params"]):
                if p.grad is not None and (p.grad.is_sparse or p.is_complex()):
                    problem = "has a sparse gradient" if p.grad.is_sparse else f"is complex ({p.dtype})"
                    raise RuntimeError(f"Shampoo: param_groups[{i}]['params'][{j}] {problem}, which Shampoo does not "
                                       f"support")
                # A block_size changed after the first step raised "Bad in-place call: input tensor size [3, 3] and
                # output tensor size [2, 2]" from the statistics' update (session 52's review)
                if p.grad is not None and "L" in self.state.get(p, {}):  # (not state[p]: a defaultdict's new entry)
                    blocks = self._blocks(p.shape[0], math.prod(p.shape[1:]), group["block_size"])
                    if [r1 - r0 for r0, r1, _, _ in blocks] != [L.shape[0] for L in self.state[p]["L"]] or \
                            [c1 - c0 for _, _, c0, c1 in blocks] != [R.shape[0] for R in self.state[p]["R"]]:
                        raise ValueError(f"Shampoo: param_groups[{i}]['params'][{j}]'s statistics are blocked in "
                                         f"another size than block_size={group['block_size']}: its statistics cannot "
                                         f"be re-blocked; keep a group's block_size from its first step")
        due = iter(self._roots_due())
        work, todo = [], []
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                roots_due = next(due)
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    self._init_state(p, group)
                state["step"] += 1
                g = p.grad
                state["exp_avg"].lerp_(g, 1 - beta1)
                state["exp_avg_sq"].mul_(beta2).addcmul_(g, g, value=1 - beta2)
                if p.dim() >= 2:
                    dtype = self._stat_dtype(p)
                    for key in ("L", "R", "PL", "PR"):  # a state loaded by other means may hold another dtype
                        state[key] = [t.to(dtype) for t in state[key]]
                    G = g.reshape(p.shape[0], math.prod(p.shape[1:])).to(dtype)
                    blocks = self._blocks(G.shape[0], G.shape[1], group["block_size"])
                    for i, (r0, r1, c0, c1) in enumerate(blocks):
                        Gb = G[r0:r1, c0:c1]
                        state["L"][i].mul_(beta2).addmm_(Gb, Gb.T, alpha=1 - beta2)
                        state["R"][i].mul_(beta2).addmm_(Gb.T, Gb, alpha=1 - beta2)
                        if torch.is_tensor(roots_due) or roots_due:  # a tensor under torch.compile: see _inverse_roots
                            todo.append((state["L"][i], state["PL"], i, group["root_eps"], group["root_method"],
                                         roots_due))
                            todo.append((state["R"][i], state["PR"], i, group["root_eps"], group["root_method"],
                                         roots_due))
                work.append((p, group, blocks if p.dim() >= 2 else None))
        if todo:
            self._inverse_roots(todo)
        for p, group, blocks in work:
            state = self.state[p]
            beta1, beta2 = group["betas"]
            # Eager: the count as a number; the bias corrections on a CPU tensor cost ~80 us a parameter a step
            # (a 40-parameter step 4.4 -> 7.9 ms, session 46). Compiled: the tensor (no recompile as it grows).
            t = state["step"] if torch.compiler.is_compiling() else float(state["step"])
            m_hat = state["exp_avg"] / (1 - beta1 ** t)
            adam = m_hat / ((state["exp_avg_sq"] / (1 - beta2 ** t)).sqrt_().add_(group["eps"]))
            if blocks is None:
                direction = adam
            else:
                M = m_hat.reshape(p.shape[0], math.prod(p.shape[1:])).to(self._stat_dtype(p))
                D = torch.empty_like(M)
                for i, (r0, r1, c0, c1) in enumerate(blocks):
                    D[r0:r1, c0:c1] = state["PL"][i] @ M[r0:r1, c0:c1] @ state["PR"][i]
                # Grafting: Shampoo's direction with Adam's step length (norms on the device: no sync).
                scale = torch.linalg.vector_norm(adam) / torch.linalg.vector_norm(D).clamp_min(1e-30)
                direction = (D * scale).reshape(p.shape).to(p.dtype)
            if group["weight_decay"]:
                p.mul_(1 - group["lr"] * group["weight_decay"])
            p.add_(direction, alpha=-group["lr"])
        return loss
