"""Every op of every family against a table-driven sweep of bad (and awkward but valid) input.

Each op has one valid call (SPECS). The sweep derives the cases from it: every tensor argument
given the wrong dtype, the other device, one dimension more, one dimension less (0-dim), zero
rows, a sparse layout, a non-contiguous layout and a NaN; in-place / out arguments given an expanded (overlapping)
tensor; and the op's own out-of-range scalars. A bad case must raise an ordinary Python exception
whose message names the argument; a valid one (non-contiguous input, NaN data, zero rows where the
op allows them) must give what the contiguous call or reference.py gives. The process must survive
every case: a crash here kills the whole run. The number of cases is printed at the end.
"""
import math
import re
from dataclasses import dataclass, field
from typing import Callable

import pytest
import torch
from conftest import DEVICES, registered_ops

import loader

CASES_RUN = []  # one entry per case, reported by conftest's terminal summary

CLEAN_ERRORS = (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError)


@dataclass
class Spec:
    family: str
    op: str
    make: Callable[[str], dict]            # device -> the kwargs of one valid call
    reference: Callable | None = None      # same kwargs -> expected output (for NaN and zero-row checks)
    bad_scalars: list = field(default_factory=list)  # (kwarg, value) pairs that must raise naming kwarg
    int_tensors: tuple = ()                # tensor kwargs whose valid dtype is an integer (timesteps)
    written: tuple = ()                    # tensor kwargs the op writes into
    zero_rows_ok: bool = True              # zero rows in the first tensor argument is valid input
    random: bool = False                   # reseed before each call so results compare
    any_batch: tuple = ()                  # tensor kwargs that take extra leading (batch) dimensions
    row_free_outputs: tuple = ()           # outputs without rows (a parameter's gradient): zero rows give zeros


def _rand(device, *shape, dtype=torch.float32):
    return torch.randn(*shape, device=device, dtype=dtype)


def _spd(device, n):
    a = torch.randn(n, n, dtype=torch.float64)
    return (a @ a.T / n + torch.eye(n, dtype=torch.float64)).float().to(device)


def _ebm_model(model, **params):
    def make(device):
        return {"x": _rand(device, 8, 4), **params}
    return make


def _schedule(device):
    return loader.diffusion.ddpm_schedule(20, device=device)


NONFINITE = [math.nan, math.inf]
ebm_ref = lambda op: (lambda **kw: getattr(loader.ebm.reference, op)(**kw))  # noqa: E731

SPECS = [
    Spec("fused", "relu_add", lambda d: {"x": _rand(d, 6, 5), "y": _rand(d, 6, 5), "bias": 0.5},
         reference=lambda **kw: loader.fused.reference.relu_add(**kw)),
    Spec("ebm", "gaussian_energy", lambda d: {"x": _rand(d, 8, 4), "mean": _rand(d, 4), "precision": _spd(d, 4)},
         reference=ebm_ref("gaussian_energy")),
    Spec("ebm", "gaussian_score", lambda d: {"x": _rand(d, 8, 4), "mean": _rand(d, 4), "precision": _spd(d, 4)},
         reference=ebm_ref("gaussian_score")),
    *[Spec("ebm", f"{model}_{kind}", _ebm_model(model), reference=ebm_ref(f"{model}_{kind}"),
           bad_scalars=[(name, v) for name in names for v in NONFINITE])
      for model, names in [("double_well", ["barrier_height", "b"]), ("harmonic", ["k"]),
                           ("rosenbrock", ["a", "b"]), ("rastrigin", ["a"]), ("ackley", ["a", "b", "c"])]
      for kind in ("energy", "score")],
    Spec("ebm", "langevin_step", lambda d: {"x": _rand(d, 8, 4), "grad": _rand(d, 8, 4), "step_size": 0.01},
         bad_scalars=[("step_size", v) for v in NONFINITE + [-0.1]] + [("noise_scale", math.nan)], random=True),
    Spec("ebm", "langevin_step_", lambda d: {"x": _rand(d, 8, 4), "grad": _rand(d, 8, 4), "step_size": 0.01},
         bad_scalars=[("step_size", math.nan)], written=("x",), random=True),
    Spec("ebm", "langevin_chain",
         lambda d: {"x": _rand(d, 8, 4), "model": "gaussian", "n_steps": 3, "step_size": 0.01,
                    "mean": _rand(d, 4), "precision": _spd(d, 4)},
         bad_scalars=[("n_steps", -1), ("step_size", math.nan), ("step_size", math.inf), ("thin", -1),
                      ("model", "no_such_model")], random=True),
    Spec("ebm", "hmc_chain",
         lambda d: {"x": _rand(d, 8, 4), "model": "harmonic", "n_steps": 3, "step_size": 0.1, "n_leapfrog": 2},
         bad_scalars=[("n_steps", -1), ("n_leapfrog", 0), ("step_size", math.nan), ("step_size", -0.1)],
         random=True),
    Spec("sampling", "normal", lambda d: {"mean": _rand(d, 5), "std": _rand(d, 5).abs() + 0.1, "n": 7},
         bad_scalars=[("n", -1)], random=True),
    Spec("sampling", "normal",
         lambda d: {"mean": _rand(d, 5), "std": _rand(d, 5).abs() + 0.1, "n": 7, "out": _rand(d, 7, 5)},
         written=("out",), random=True),
    Spec("sampling", "cem_update",
         lambda d: {"samples": _rand(d, 16, 5), "scores": _rand(d, 16), "n_elite": 4, "mean": _rand(d, 5),
                    "std": _rand(d, 5).abs()},
         reference=lambda **kw: loader.sampling.reference.cem_update(**kw),
         bad_scalars=[("n_elite", 0), ("n_elite", 17), ("smoothing", math.nan), ("smoothing", 1.5),
                      ("min_std", -1.0)], zero_rows_ok=False),
    Spec("diffusion", "ddpm_schedule", lambda d: {"num_train_timesteps": 10},
         bad_scalars=[("num_train_timesteps", 0), ("beta_schedule", "cosine"), ("beta_start", math.nan),
                      ("beta_end", -1.0)]),
    Spec("diffusion", "ddpm_step",
         lambda d: {"model_output": _rand(d, 3, 4, 6), "t": torch.tensor([5, 0, 19], device=d),
                    "sample": _rand(d, 3, 4, 6), "schedule": _schedule(d), "noise": _rand(d, 3, 4, 6)},
         reference=lambda **kw: loader.diffusion.reference.ddpm_step(**kw),
         bad_scalars=[("prediction_type", "x0"), ("clip_sample_range", math.nan)], int_tensors=("t",)),
    Spec("diffusion", "ddpm_step",
         lambda d: {"model_output": _rand(d, 3, 4, 6), "t": 19, "sample": _rand(d, 3, 4, 6),
                    "schedule": _schedule(d)},
         bad_scalars=[("t", 20), ("t", -1)], random=True),
    Spec("diffusion", "ddim_step",
         lambda d: {"model_output": _rand(d, 3, 4, 6), "t": 10, "t_prev": 5, "sample": _rand(d, 3, 4, 6),
                    "schedule": _schedule(d)},
         bad_scalars=[("t_prev", 10), ("t", 20), ("eta", math.nan), ("eta", -1.0)], random=True),
    Spec("diffusion", "conv1d_gn_mish",
         lambda d: {"x": _rand(d, 2, 6, 9), "weight": _rand(d, 8, 6, 3), "bias": _rand(d, 8),
                    "gn_weight": _rand(d, 8), "gn_bias": _rand(d, 8), "num_groups": 4},
         reference=lambda **kw: loader.diffusion.reference.conv1d_gn_mish(**kw),
         bad_scalars=[("num_groups", 3), ("num_groups", 0), ("padding", -1), ("eps", math.nan), ("eps", -1.0)]),
    Spec("diffusion", "gn_mish_backward",
         lambda d: {"grad": _rand(d, 2, 8, 5), "conv_out": _rand(d, 2, 8, 5), "gn_weight": _rand(d, 8),
                    "gn_bias": _rand(d, 8), "num_groups": 4},
         reference=lambda **kw: loader.diffusion.reference.gn_mish_backward(**kw),
         bad_scalars=[("num_groups", 3), ("num_groups", 0), ("eps", math.nan), ("eps", -1.0)],
         row_free_outputs=(1, 2, 3)),
    Spec("linalg", "matrix_inverse_root", lambda d: {"A": _spd(d, 6)},
         bad_scalars=[("p", 0), ("p", -2), ("p", 33), ("eps", math.nan), ("eps", -1.0), ("fallback", "maybe")],
         any_batch=("A",)),
    Spec("linalg", "kron", lambda d: {"A": _rand(d, 3, 4), "B": _rand(d, 2, 5)},
         reference=lambda **kw: loader.linalg.reference.kron(**kw)),
    Spec("linalg", "per_sample_grad_linear", lambda d: {"x": _rand(d, 5, 4), "grad_out": _rand(d, 5, 3)},
         reference=lambda **kw: loader.linalg.reference.per_sample_grad_linear(**kw)),
]


def _call(spec, kwargs):
    if spec.random:
        torch.manual_seed(1234)
    return getattr(loader.load(spec.family), spec.op)(**kwargs)


def _tensors(out):
    return [t for t in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(t, torch.Tensor)]


def _assert_same(got, expected):
    for g, e in zip(_tensors(got), _tensors(expected)):
        torch.testing.assert_close(g, e.to(g.dtype), equal_nan=True, rtol=1e-4, atol=1e-4)


def _expect(spec, kwargs, name, valid=None):
    """The call must raise naming `name`, or (when `valid` is given) succeed and pass `valid`."""
    CASES_RUN.append((spec.op, name))
    try:
        result = _call(spec, kwargs)
    except CLEAN_ERRORS as error:
        assert re.search(rf"\b{re.escape(name)}\b", str(error)), f"the error does not name {name!r}: {error}"
        return
    assert valid is not None, f"{spec.op} accepted bad {name!r}"
    valid(result)


def _required_tensors(spec) -> set:
    """The op's arguments of schema type Tensor (not Tensor?): None there is bad input."""
    packet = getattr(getattr(torch.ops, loader.load(spec.family).namespace), spec.op)
    return {a.name for a in packet.default._schema.arguments if str(a.type) == "Tensor"}


def _mutations(spec, device):
    """(case id, argument name, kwargs builder, validity check or None) for one spec."""
    base = spec.make(device)
    tensor_args = [k for k, v in base.items() if isinstance(v, torch.Tensor)]
    required = _required_tensors(spec)
    for name in tensor_args:
        if name in required:  # arrives as an undefined tensor: "tensor does not have a device" until session 40
            yield f"{name}-None", name, lambda kw, n=name: {**kw, n: None}, None
        is_int = name in spec.int_tensors
        wrong_dtypes = [torch.float32] if is_int else [torch.int64, torch.bool, torch.complex64]
        for dtype in wrong_dtypes:
            yield f"{name}-{dtype}", name, lambda kw, n=name, dt=dtype: {**kw, n: kw[n].to(dt)}, None
        if len(DEVICES) > 1 and len(tensor_args) > 1:  # with one tensor, another device is just valid input
            other = "cpu" if device == "cuda" else "cuda"
            yield f"{name}-on-{other}", name, lambda kw, n=name: {**kw, n: kw[n].to(other)}, None
        if name not in spec.int_tensors + spec.any_batch:
            yield f"{name}-extra-dim", name, lambda kw, n=name: {**kw, n: kw[n].unsqueeze(0).expand(2, *kw[n].shape)}, None
            yield f"{name}-0-dim", name, lambda kw, n=name: {**kw, n: kw[n].reshape(-1)[0].clone()}, None
        # A sparse tensor reached no kernel, and the message said the build had none "for cpu tensors" (one
        # "built without its CUDA half ... runs CPU tensors only"), naming no argument.
        yield f"{name}-sparse", name, lambda kw, n=name: {**kw, n: kw[n].to_sparse()}, None
        if not is_int:
            yield f"{name}-non-contiguous", name, lambda kw, n=name: {**kw, n: _non_contiguous(kw[n])}, "same"
            if name not in spec.written:
                yield f"{name}-nan", name, lambda kw, n=name: {**kw, n: _with_nan(kw[n])}, "nan"
        if name in spec.written:
            yield f"{name}-expanded", name, lambda kw, n=name: {**kw, n: kw[n][:1].expand_as(kw[n])}, None
    if tensor_args:
        first = tensor_args[0]
        yield (f"{first}-zero-rows", first, lambda kw: _zero_rows(kw, base, first),
               "zero" if spec.zero_rows_ok else None)
    for name, value in spec.bad_scalars:
        yield f"{name}={value}", name, lambda kw, n=name, v=value: {**kw, n: v}, None


def _non_contiguous(t):
    if t.dim() == 0:
        return t
    wide = torch.empty(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
    view = wide[..., ::2]
    view.copy_(t)
    return view


def _with_nan(t):
    t = t.clone()
    t.view(-1)[0] = math.nan
    return t


def _zero_rows(kwargs, base, first):
    """Zero rows in the first tensor and in every tensor that shares its row count."""
    rows = base[first].shape[0]
    return {k: v[:0] if isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[0] == rows
            else v for k, v in kwargs.items()}


def _cases():
    for spec in SPECS:
        for device in DEVICES:
            for case_id, name, mutate, check in _mutations(spec, device):
                yield pytest.param(spec, device, name, mutate, check, id=f"{spec.op}-{device}-{case_id}")


@pytest.mark.parametrize("spec, device, name, mutate, check", list(_cases()))
def test_bad_input(spec, device, name, mutate, check):
    kwargs = spec.make(device)
    mutated = mutate(kwargs)
    if check is None:
        return _expect(spec, mutated, name)
    if check == "same":  # the same values in another layout: the same answer
        expected = _call(spec, kwargs)
        return _expect(spec, mutated, name, lambda got: _assert_same(got, expected))
    if check == "zero":  # empty batches give empty results
        def valid(got):
            for i, t in enumerate(_tensors(got)):
                if i in spec.row_free_outputs:
                    assert t.numel() > 0 and not t.any(), f"zero rows in, output {i} is not zeros: {t}"
                else:
                    assert t.numel() == 0, f"zero rows in, {tuple(t.shape)} out"
            if spec.reference is not None:
                _assert_same(got, spec.reference(**mutated))
        return _expect(spec, mutated, name, valid)
    # NaN data: raising is fine; a result must agree with the reference (NaN where it has NaN)
    # or, without a reference, must not be all zeros.
    def valid(got):
        if spec.reference is not None:
            _assert_same(got, spec.reference(**mutated))
        else:
            assert any(not t.eq(0).all() for t in _tensors(got) if t.numel()), "NaN input came back as zeros"
    return _expect(spec, mutated, name, valid)


def test_every_op_of_every_family_is_swept():
    """Every C++ op of every family has a row in SPECS (out= variants through their Python op)."""
    swept = {(s.family, s.op) for s in SPECS} | {(s.family, s.op + "_out") for s in SPECS if "out" in s.written}
    for family in loader.families():
        ops = {name.split("::")[1].split(".")[0] for name in registered_ops(family)}
        assert ops, f"no ops found for {family}"
        twins = {op for op in ops if op.endswith("_autograd") and op[:-len("_autograd")] in ops}  # jk.h's
        missing = {op for op in ops - twins if (family, op) not in swept}
        assert not missing, f"{family}: ops without bad-input cases: {sorted(missing)}"
