"""Energy-based models: closed-form energies and scores, Langevin and HMC samplers.

x is a batch of rows, shape (B, D); the score is −∇ₓE. Energies return (B,), scores
(B, D). Models: gaussian(mean, precision) = ½(x−μ)ᵀP(x−μ), double_well(barrier_height, b)
= h·Σ(xᵢ²−b²)², harmonic(k) = ½k·Σxᵢ², rosenbrock(a, b) (D ≥ 2), rastrigin(a), ackley(a, b, c).

dtypes: energies, scores and langevin_step take float32, float64, float16 and bfloat16
(half types accumulate in float32); the chains (compute-bound) take float32 and float64.
Random numbers come from PyTorch's generator (Philox), so torch.manual_seed reproduces
a run on the same device, and CUDA graphs can capture the ops. No op syncs with the host.
Shapes under fake tensors (torch.compile, opcheck) come from the ops' Meta registration in C++.
"""
import math
from collections.abc import Callable
from numbers import Real

import torch
import torch.distributed as dist

NAMESPACE: str  # the build's op namespace, set by loader.py before this file runs
register_autograd: Callable  # loader.register_autograd, set beside it: torch.library.register_autograd's
                             # signature at a fraction of its load time
register_vmap: Callable      # loader.register_vmap: torch.library.register_vmap's, quicker to load
register_drawing_vmap: Callable  # loader.register_drawing_vmap: vmap's randomness for an op that draws
vjp_by_autograd: Callable    # loader.vjp_by_autograd: a backward by autograd of a PyTorch formula
check_numbers: Callable      # loader.check_numbers: refuses a float argument given as a tensor with a derivative
load_reference: Callable     # this family's reference.py, imported on the first call
_ops = getattr(torch.ops, NAMESPACE)

__all__ = [
    "gaussian_energy", "gaussian_score", "double_well_energy", "double_well_score",
    "harmonic_energy", "harmonic_score", "rosenbrock_energy", "rosenbrock_score",
    "rastrigin_energy", "rastrigin_score", "ackley_energy", "ackley_score",
    "energy", "score", "langevin_step", "langevin_step_", "langevin_chain", "hmc_chain", "distributed_chain",
    "MODELS",
]

# Scalar parameters of each model, in schema order, with their defaults.
MODELS = {
    "gaussian": {},  # mean (D,) and precision (D, D) tensors instead
    "double_well": {"barrier_height": 2.0, "b": 1.0},
    "harmonic": {"k": 1.0},
    "rosenbrock": {"a": 1.0, "b": 100.0},
    "rastrigin": {"a": 10.0},
    "ackley": {"a": 20.0, "b": 0.2, "c": 2 * math.pi},
}


# ---------------------------------------------------------------- energies and scores

def gaussian_energy(x: torch.Tensor, mean: torch.Tensor, precision: torch.Tensor) -> torch.Tensor:
    """½(x−μ)ᵀP(x−μ) per row: x (B, D), mean (D,), precision (D, D) -> (B,).

    Only ½(P + Pᵀ) matters, so P need not be symmetric. Any D: rows up to D = 64 are done in
    one pass over x, wider ones through a matrix product. Differentiable in x, mean, precision.
    dtypes: float32, float64, float16, bfloat16 (float32 accumulation); all three tensors alike.
    On GPUs of compute capability 8.0 and later, float32 rows of D = 16 go through the tensor cores,
    each operand split into two TF32 parts (three products): relative error ~1e-6, against ~1e-7
    for float32 FMAs (the same holds for gaussian_score).
    """
    return _ops.gaussian_energy(x, mean, precision)


def gaussian_score(x: torch.Tensor, mean: torch.Tensor, precision: torch.Tensor) -> torch.Tensor:
    """−½(P + Pᵀ)(x − μ) per row: (B, D). Differentiable in x, mean, precision (see score()).
    dtypes as gaussian_energy."""
    return _ops.gaussian_score(x, mean, precision)


def double_well_energy(x: torch.Tensor, barrier_height: float = 2.0, b: float = 1.0) -> torch.Tensor:
    """h·Σᵢ(xᵢ² − b²)² per row -> (B,). Differentiable in x. dtypes: float32/64, float16, bfloat16."""
    check_numbers(barrier_height=barrier_height, b=b)
    return _ops.double_well_energy(x, barrier_height, b)


def double_well_score(x: torch.Tensor, barrier_height: float = 2.0, b: float = 1.0) -> torch.Tensor:
    """−4h·x(x² − b²) -> (B, D). Differentiable in x (see score()). dtypes: float32/64, float16, bfloat16."""
    check_numbers(barrier_height=barrier_height, b=b)
    return _ops.double_well_score(x, barrier_height, b)


def harmonic_energy(x: torch.Tensor, k: float = 1.0) -> torch.Tensor:
    """½k·Σᵢxᵢ² per row -> (B,). Differentiable in x. dtypes: float32/64, float16, bfloat16."""
    check_numbers(k=k)
    return _ops.harmonic_energy(x, k)


def harmonic_score(x: torch.Tensor, k: float = 1.0) -> torch.Tensor:
    """−k·x -> (B, D). Differentiable in x (see score()). dtypes: float32/64, float16, bfloat16."""
    check_numbers(k=k)
    return _ops.harmonic_score(x, k)


def rosenbrock_energy(x: torch.Tensor, a: float = 1.0, b: float = 100.0) -> torch.Tensor:
    """Σᵢ<D−1 [b(xᵢ₊₁ − xᵢ²)² + (a − xᵢ)²] per row, D ≥ 2 -> (B,). Differentiable in x.
    dtypes: float32/64, float16, bfloat16."""
    check_numbers(a=a, b=b)
    return _ops.rosenbrock_energy(x, a, b)


def rosenbrock_score(x: torch.Tensor, a: float = 1.0, b: float = 100.0) -> torch.Tensor:
    """−∇ of rosenbrock_energy -> (B, D). Differentiable in x (see score()). dtypes: float32/64, float16, bfloat16."""
    check_numbers(a=a, b=b)
    return _ops.rosenbrock_score(x, a, b)


def rastrigin_energy(x: torch.Tensor, a: float = 10.0) -> torch.Tensor:
    """aD + Σᵢ[xᵢ² − a·cos 2πxᵢ] per row -> (B,). Differentiable in x. dtypes: float32/64, float16, bfloat16."""
    check_numbers(a=a)
    return _ops.rastrigin_energy(x, a)


def rastrigin_score(x: torch.Tensor, a: float = 10.0) -> torch.Tensor:
    """−(2x + 2πa·sin 2πx) -> (B, D). Differentiable in x (see score()). dtypes: float32/64, float16, bfloat16."""
    check_numbers(a=a)
    return _ops.rastrigin_score(x, a)


def ackley_energy(x: torch.Tensor, a: float = 20.0, b: float = 0.2, c: float = 2 * math.pi) -> torch.Tensor:
    """−a·exp(−b·√(mean x²)) − exp(mean cos(c·x)) + a + e per row -> (B,). Differentiable in x.
    dtypes: float32/64, float16, bfloat16."""
    check_numbers(a=a, b=b, c=c)
    return _ops.ackley_energy(x, a, b, c)


def ackley_score(x: torch.Tensor, a: float = 20.0, b: float = 0.2, c: float = 2 * math.pi) -> torch.Tensor:
    """−∇ of ackley_energy -> (B, D); at a row x = 0 the √ term contributes 0. Differentiable in x
    (see score()). dtypes: float32/64, float16, bfloat16."""
    check_numbers(a=a, b=b, c=c)
    return _ops.ackley_score(x, a, b, c)


def _model_args(model: str, params: dict):
    """(mean, precision, [scalar params in schema order]) for a model name and keyword parameters."""
    if model == "gaussian":
        unknown = set(params) - {"mean", "precision"}
        if unknown:
            raise TypeError(f"model 'gaussian' takes mean= and precision=, not {sorted(unknown)}")
        return params.get("mean"), params.get("precision"), []
    if model not in MODELS:  # energy() and score() reach no op that would say so
        raise ValueError(f"model must be one of {', '.join(MODELS)}; got {model!r}")
    unknown = set(params) - set(MODELS[model])
    if unknown:
        raise TypeError(f"model {model!r} takes {sorted(MODELS[model])}, not {sorted(unknown)}")
    values = []
    for name, default in MODELS[model].items():  # the chain ops take a list: their message said "params"
        given = params.get(name, default)
        check_numbers(**{name: given})  # float() below drops a derivative (the chains had no check)
        try:  # float()'s own errors named no parameter ("could not convert string to float: 'a'")
            if isinstance(given, (str, bytes, bool)):  # float("2") and float(True) passed (session 52's review)
                raise TypeError
            value = float(given)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be a number, got {given!r}") from None
        if not -math.inf < value < math.inf:  # NaN fails this too; math.isfinite breaks torch.compile's graph
            raise ValueError(f"{name} must be finite, got {value}")
        values.append(value)
    return None, None, values


def energy(x: torch.Tensor, model: str, **params) -> torch.Tensor:
    """The energy of the named model (see MODELS), e.g. energy(x, "double_well", barrier_height=1.0)."""
    mean, precision, args = _model_args(model, params)
    if model == "gaussian":
        return gaussian_energy(x, mean, precision)
    return getattr(_ops, f"{model}_energy")(x, *args)


def score(x: torch.Tensor, model: str, **params) -> torch.Tensor:
    """The score −∇E of the named model (see MODELS).

    Scores are differentiable: the backward is autograd of the closed form in reference.py (PyTorch
    ops, slower than the kernels; half types in float32), so a backward of an energy's gradient with
    create_graph=True (score matching, Hessian-vector products) is exact, to any order."""
    mean, precision, args = _model_args(model, params)
    if model == "gaussian":
        return gaussian_score(x, mean, precision)
    return getattr(_ops, f"{model}_score")(x, *args)


_LOCAL = ["double_well", "harmonic", "rosenbrock", "rastrigin", "ackley"]

def _local_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])
    ctx.params = inputs[1:]


def _closed_form(table, name):
    """reference.py's ENERGIES[name] or SCORES[name], half types in float32 as in the kernels: scores'
    backward and every energy's and score's forward mode differentiate it."""
    def formula(*args):
        half = (torch.float16, torch.bfloat16)
        return getattr(load_reference(), table)[name](*(a.float() if isinstance(a, torch.Tensor) and a.dtype in half
                                                        else a for a in args))
    return formula


def _make_local_backward(name):
    score_op = getattr(_ops, f"{name}_score")

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        grad_x = score_op(x, *ctx.params) * grad.neg()[:, None] if ctx.needs_input_grad[0] else None
        return (grad_x,) + (None,) * len(ctx.params)

    return backward


def _forward_formula(table, name):
    closed_form = _closed_form(table, name)
    return lambda value, *args: closed_form(*args)


for _name in _LOCAL:
    register_autograd(f"{NAMESPACE}::{_name}_energy", _make_local_backward(_name),
                      setup_context=_local_setup, forward_formula=_forward_formula("ENERGIES", _name))


def _score_setup(ctx, inputs, output):
    n_tensors = 3 if isinstance(inputs[1], torch.Tensor) else 1  # gaussian: x, mean, precision
    ctx.save_for_backward(*inputs[:n_tensors])
    ctx.params = inputs[n_tensors:]


def _make_score_backward(name):
    formula = _closed_form("SCORES", name)

    def backward(ctx, grad):
        return vjp_by_autograd(formula, (*ctx.saved_tensors, *ctx.params), ctx.needs_input_grad, grad)

    return backward


for _name in MODELS:
    register_autograd(f"{NAMESPACE}::{_name}_score", _make_score_backward(_name), setup_context=_score_setup,
                      forward_formula=_forward_formula("SCORES", _name))


def _gaussian_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _gaussian_backward(ctx, grad):
    x, mean, precision = ctx.saved_tensors
    s = _ops.gaussian_score(x, mean, precision)  # −∂E/∂x = ∂E/∂μ
    grad_x = -s * grad[:, None] if ctx.needs_input_grad[0] else None
    grad_mean = (s * grad[:, None]).sum(0) if ctx.needs_input_grad[1] else None
    grad_precision = None
    if ctx.needs_input_grad[2]:  # ∂E/∂P = ½(x−μ)(x−μ)ᵀ
        d = x - mean
        grad_precision = 0.5 * (d * grad[:, None]).T @ d
    return grad_x, grad_mean, grad_precision


register_autograd(f"{NAMESPACE}::gaussian_energy", _gaussian_backward, setup_context=_gaussian_setup,
                  forward_formula=_forward_formula("ENERGIES", "gaussian"))


def _rows_vmap(op_name):
    """torch.vmap of an energy or score: the vmapped batches of rows are one batch of rows, so one call
    on (N·B, D) instead of torch's fallback of N calls. A batched mean or precision: one call per member."""
    op = getattr(_ops, op_name)

    def rule(info, in_dims, x, *params):
        x_dim, *param_dims = in_dims
        if x_dim is not None and all(d is None for d in param_dims) and x.dim() == 3:
            rows = x.movedim(x_dim, 0)
            out = op(rows.reshape(-1, rows.shape[-1]), *params)
            return out.reshape(*rows.shape[:2], *out.shape[1:]), 0
        # batched parameters, or an x that is not (B, D) per member (the op says what is wrong)
        def member(a, d, i):
            return a if d is None else a.select(d, i)
        return torch.stack([op(*(member(a, d, i) for a, d in zip((x, *params), in_dims)))
                            for i in range(info.batch_size)]), 0

    return rule


for _name in MODELS:  # the op and its autograd twin (loader.register_autograd), which vmap can meet too
    for _kind in ("energy", "score"):
        for _op in (f"{_name}_{_kind}", f"{_name}_{_kind}_autograd"):
            register_vmap(f"{NAMESPACE}::{_op}", _rows_vmap(f"{_name}_{_kind}"))


# ---------------------------------------------------------------- Langevin step

def _clamp_bounds(clamp):
    """(min, max) for the op from clamp; bounds checked here so that messages name clamp, not the op's
    clamp_min (clamp=nan said "clamp_min must be finite, got -nan")."""
    if clamp is None:
        return None, None
    if isinstance(clamp, bool):  # a Real: clamp=False meant "no clamp" and clamped x to [0, 0]
        raise TypeError(f"clamp must be None, a number >= 0 (meaning [-clamp, clamp]) or a (min, max) pair, got "
                        f"{clamp} (for no clamp, pass None)")
    if isinstance(clamp, torch.Tensor) and clamp.dim() == 0:  # a 0-d tensor is a number (it failed to unpack)
        check_numbers(clamp=clamp)
        clamp = clamp.item()
    if isinstance(clamp, Real):
        if not 0 <= clamp < math.inf:  # NaN fails this too
            raise ValueError(f"clamp must be a finite number >= 0 (meaning [-clamp, clamp]) or a (min, max) pair, "
                             f"got {clamp}")
        return -float(clamp), float(clamp)
    try:
        lo, hi = clamp
    except (TypeError, ValueError):
        raise _not_a_clamp(clamp) from None
    check_numbers(**{"clamp[0]": lo, "clamp[1]": hi})  # before float(), which reads a derivative away
    try:
        lo, hi = (None if lo is None else float(lo)), (None if hi is None else float(hi))
    except (TypeError, ValueError):
        raise _not_a_clamp(clamp) from None
    for side, bound in (("min", lo), ("max", hi)):
        if bound is not None and not -math.inf < bound < math.inf:
            raise ValueError(f"clamp's {side} must be finite (None for no bound), got {bound}")
    if lo is not None and hi is not None and lo > hi:  # the op said "clamp: clamp_min (2) must be <= clamp_max (1)"
        raise ValueError(f"clamp's min must be <= its max, got clamp=({lo}, {hi})")
    return lo, hi


def _not_a_clamp(clamp) -> TypeError:
    return TypeError(f"clamp must be a number >= 0 (meaning [-clamp, clamp]) or a (min, max) pair, got {clamp!r}")


def _step_numbers(step_size, noise_scale=1.0, clamp=None):
    """A step's or chain's float arguments, checked (check_numbers: a tensor with a derivative is refused by name;
    langevin_step_ and the chains had no check and dropped it), and clamp as the op's (min, max)."""
    check_numbers(step_size=step_size, noise_scale=noise_scale)
    return _clamp_bounds(clamp)


def langevin_step(x: torch.Tensor, grad: torch.Tensor, step_size: float, noise_scale: float = 1.0,
                  clamp=None, generator: torch.Generator | None = None) -> torch.Tensor:
    """One Langevin step: x − η·grad + noise_scale·√(2η)·ε, ε ~ N(0, I) drawn in the kernel.

    grad is ∇E (e.g. from autograd of a network's energy), same shape/dtype/device as x (any shape).
    clamp: None, c (clamp to [−c, c]) or (min, max) (either may be None). Differentiable in x and
    grad (the noise is a constant). dtypes: float32, float64, float16, bfloat16 (float32 math).
    generator (positional, as in ddpm_step/ddim_step; keyword-only in normal and the chains): a
    torch.Generator on x's device; default: the device's default generator (torch.manual_seed reproduces ε).
    """
    lo, hi = _step_numbers(step_size, noise_scale, clamp)
    return _ops.langevin_step(x, grad, step_size, noise_scale, lo, hi, generator)


def langevin_step_(x: torch.Tensor, grad: torch.Tensor, step_size: float, noise_scale: float = 1.0,
                   clamp=None, generator: torch.Generator | None = None) -> torch.Tensor:
    """In-place langevin_step: updates and returns x. Not differentiable: with grad mode on, x and
    grad must not require grad (use langevin_step, or torch.no_grad()); x's version counter is bumped,
    so a backward that saved x's old values raises. generator as in langevin_step."""
    lo, hi = _step_numbers(step_size, noise_scale, clamp)
    _ops.langevin_step_(x, grad, step_size, noise_scale, lo, hi, generator)
    return x


def _langevin_step_setup(ctx, inputs, output):
    ctx.step_size = inputs[2]
    ctx.bounds = inputs[4], inputs[5]
    ctx.save_for_backward(output if inputs[4] is not None or inputs[5] is not None else None)


def _inside_bounds(out, lo, hi):
    """Where the output was not clamped (the step's derivatives are 0 elsewhere)."""
    inside = torch.ones_like(out, dtype=torch.bool)
    if lo is not None:
        inside &= out > lo
    if hi is not None:
        inside &= out < hi
    return inside


def _langevin_step_backward(ctx, grad):
    (out,) = ctx.saved_tensors
    if out is not None:
        grad = grad * _inside_bounds(out, *ctx.bounds)
    return grad, -ctx.step_size * grad, None, None, None, None, None


def _langevin_step_forward_formula(value, x, grad, step_size, noise_scale, lo, hi, generator):
    update = x - step_size * grad  # the noise is a constant
    return update if lo is None and hi is None else update * _inside_bounds(value, lo, hi)


register_autograd(f"{NAMESPACE}::langevin_step", _langevin_step_backward,
                  setup_context=_langevin_step_setup, forward_formula=_langevin_step_forward_formula)
for _op in ("langevin_step", "langevin_chain", "hmc_chain"):
    register_drawing_vmap(f"{NAMESPACE}::{_op}")
register_drawing_vmap(f"{NAMESPACE}::langevin_step_", in_place=True)


# ---------------------------------------------------------------- chains

def _refuse_other_chains_options(name: str, params: dict, other: str, options: tuple) -> None:
    """The other chain's options among a chain's model keywords, named as such: else _model_args blamed the model
    ("model 'harmonic' takes ['k'], not ['clamp']")."""
    given = sorted(set(options) & set(params))
    if given:
        noun = "option" if len(options) == 1 else "options"
        raise TypeError(f"{name} takes no {' or '.join(given)} ({other}'s {noun})")


def langevin_chain(x: torch.Tensor, model: str, n_steps: int, step_size: float, noise_scale: float = 1.0, *,
                   thin: int = 0, clamp=None, generator: torch.Generator | None = None, **params):
    """Run n_steps of unadjusted Langevin, x ← x + η·score(x) + noise_scale·√(2η)·ε, on every row.

    model: a name in MODELS with its parameters as keywords, e.g.
        langevin_chain(x, "gaussian", 100, 0.01, mean=mu, precision=P)
        langevin_chain(x, "double_well", 1000, 0.01, barrier_height=1.0)
    The whole chain runs in one kernel launch on CUDA for D <= 64 (float32; 32 for float64),
    state in registers (the Gaussian's float32 rows of exactly 16 on the tensor cores: each step's
    gradient from split TF32 products, relative error ~2⁻²¹ instead of float32's 2⁻²⁴); wider rows take one score
    kernel (a matrix product for the Gaussian) plus one fused update per step. On the CPU, rows of D <= 64 go 16 at a
    time in vector lanes (the Gaussian's 8); wider ones a row at a time, but the Gaussian's a matrix product per step
    as on CUDA. A seed reproduces a chain on the same device and route; the CPU's stream is its own.
    Never syncs with the host. thin > 0 also returns the trajectory, x after every thin-th step:
    (n_steps // thin, B, D). Returns x, or (x, trajectory) when thin > 0. clamp and generator (keyword-only
    here) as in langevin_step. dtypes: float32, float64. Not differentiable: the samples are constants for autograd
    (they never require grad, as torch.randn's), like the detached samples of contrastive divergence.
    """
    _refuse_other_chains_options("langevin_chain", params, "hmc_chain", ("n_leapfrog",))
    mean, precision, args = _model_args(model, params)
    lo, hi = _step_numbers(step_size, noise_scale, clamp)
    out, traj = _ops.langevin_chain(x, model, mean, precision, args, n_steps, step_size, noise_scale, thin, lo, hi,
                                    generator)
    return (out, traj) if thin > 0 else out


def hmc_chain(x: torch.Tensor, model: str, n_steps: int, step_size: float, n_leapfrog: int = 10, *,
              thin: int = 0, generator: torch.Generator | None = None, **params):
    """Run n_steps of Hamiltonian Monte Carlo (fresh N(0, I) momentum, n_leapfrog leapfrog steps of
    size step_size, Metropolis accept/reject) on every row. model, params and generator (keyword-only) as in
    langevin_chain.

    Returns (x, accept_rate) with accept_rate (B,) the fraction of accepted proposals per chain,
    or (x, accept_rate, trajectory) when thin > 0. One launch on CUDA for D <= 32 (float32; 16
    for float64; the Gaussian's float32 rows of exactly 16 on the tensor cores, as in langevin_chain); wider rows (on the CPU: Gaussian rows wider than 64) compose the score/energy
    kernels with ATen ops, without host sync.
    dtypes: float32, float64. Not differentiable: the outputs never require grad (as langevin_chain's).
    """
    _refuse_other_chains_options("hmc_chain", params, "langevin_chain", ("clamp", "noise_scale"))
    mean, precision, args = _model_args(model, params)
    _step_numbers(step_size)
    out, acc, traj = _ops.hmc_chain(x, model, mean, precision, args, n_steps, step_size, n_leapfrog, thin, generator)
    return (out, acc, traj) if thin > 0 else (out, acc)


# ---------------------------------------------------------------- several GPUs

def distributed_chain(x: torch.Tensor, model: str, n_steps: int, step_size: float, *, sampler: str = "langevin",
                      seed: int = 0, gather: bool = True, group: dist.ProcessGroup | None = None, **kwargs):
    """Run langevin_chain or hmc_chain on this rank's rows, then combine the ranks of a torch.distributed group.

    Call it on every rank (e.g. under torchrun), each with its own x (B, D) on its own device and the same
    B everywhere. Rank r draws its noise from a generator seeded seed + r, so N ranks give exactly the rows
    that N single-process runs with seeds seed, ..., seed + N - 1 give, stacked in rank order.
    sampler: "langevin" (kwargs as langevin_chain: noise_scale, clamp, thin, model parameters) or "hmc"
    (kwargs as hmc_chain: n_leapfrog, thin, model parameters).
    Returns (samples, stats) on every rank, or (samples, stats, trajectory) when thin > 0. samples: all
    N*B rows when gather (all_gather), else this rank's B rows; trajectory likewise, (n_steps // thin,
    N*B or B, D). stats (float64, from an all_reduce of per-rank sums, so they cover every rank even
    without gather; of the final samples): "n", "mean" (D,), "cov" (D, D) (divided by n, not n - 1:
    torch.cov(x.T, correction=0)), and for hmc "accept_rate" over all chains.
    """
    if sampler not in ("langevin", "hmc"):
        raise ValueError(f"sampler must be 'langevin' or 'hmc', got {sampler!r}")
    if "generator" in kwargs:  # the chain's own keyword: Python's "got multiple values" named the chain, not seed
        raise TypeError("distributed_chain draws from a generator of its own on each rank, seeded seed + rank: "
                        "pass seed=, not generator=")
    generator = torch.Generator(device=x.device).manual_seed(seed + dist.get_rank(group))
    thin = kwargs.get("thin", 0)
    if sampler == "langevin":
        result = langevin_chain(x, model, n_steps, step_size, generator=generator, **kwargs)
        out, traj = result if thin > 0 else (result, None)
        accepted = None
    else:
        out, accept_rate, *traj = hmc_chain(x, model, n_steps, step_size, generator=generator, **kwargs)
        traj = traj[0] if traj else None
        accepted = accept_rate.double().sum().view(1)
    local = out.double()
    # One all_reduce carries every sum: [count, Σx (D), Σxxᵀ (D·D), accepted].
    sums = torch.cat([local.new_tensor([out.shape[0]]), local.sum(0), (local.T @ local).flatten(),
                      accepted if accepted is not None else local.new_zeros(1)])
    dist.all_reduce(sums, group=group)
    d = out.shape[1]
    n, mean = sums[0], sums[1:1 + d] / sums[0]
    cov = sums[1 + d:1 + d + d * d].view(d, d) / n - torch.outer(mean, mean)
    stats = {"n": n, "mean": mean, "cov": cov}
    if sampler == "hmc":
        stats["accept_rate"] = sums[-1] / n
    if gather:
        out = _all_gather_rows(out, 0, group)
        traj = None if traj is None else _all_gather_rows(traj, 1, group)
    return (out, stats) if traj is None else (out, stats, traj)


def _all_gather_rows(t: torch.Tensor, dim: int, group) -> torch.Tensor:
    """Every rank's t, concatenated along dim in rank order."""
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, t.contiguous(), group=group)
    return torch.cat(parts, dim)
