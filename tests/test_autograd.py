"""What autograd does with every op: derivatives of any order where an op is differentiable, constants
where it is a sampler, an error (never silent zeros) where it writes in place.

Until session 24 the score ops had no Autograd kernel, so torch's fallback let a backward through them
return nothing with only a warning: an energy's gradient taken with create_graph=True (score matching,
Hessian-vector products) was silently wrong. In-place ops did not bump version counters either, so a
backward that had saved a tensor they then overwrote used the new values.
"""
import math

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from conftest import needs_cuda, registered_ops

import loader

ebm, diffusion, sampling = loader.load("ebm"), loader.load("diffusion"), loader.load("sampling")
fused, linalg = loader.load("fused"), loader.load("linalg")

F64 = torch.float64
EBM_PARAMS = {"double_well": (1.5, 0.8), "harmonic": (2.0,), "rosenbrock": (1.0, 10.0), "rastrigin": (5.0,),
              "ackley": (20.0, 0.2, 2 * math.pi)}


def rand(*shape, device="cpu", grad=True):
    return torch.randn(*shape, dtype=F64, device=device).requires_grad_(grad)


def gaussian_args(D, device):
    a = torch.randn(D, D, dtype=F64, device=device)
    precision = a @ a.T / D + torch.eye(D, dtype=F64, device=device) + 0.1 * torch.randn(D, D, dtype=F64, device=device)
    return rand(D, device=device), precision.requires_grad_()


def test_no_op_is_left_to_torchs_autograd_fallback():
    """jk.h: every op is defined with def_differentiable, def_not_differentiable or def_in_place, each of
    which puts a kernel at the Autograd key (the fallback warns and returns no gradient)."""
    for family in loader.families():
        ops = registered_ops(family)
        assert ops, f"no ops found for {family}"
        missing = sorted(op for op in ops if not torch._C._dispatch_has_kernel_for_dispatch_key(op, "Autograd"))
        assert not missing, f"ops left to torch's autograd fallback: {missing}"


# ---------------------------------------------------------------- derivatives of any order

def ebm_cases(device):
    x = lambda: rand(5, 4, device=device)  # noqa: E731
    cases = {}
    for model, params in EBM_PARAMS.items():
        for kind in ("energy", "score"):
            op = getattr(ebm, f"{model}_{kind}")
            cases[f"{model}_{kind}"] = (lambda y, op=op, params=params: op(y, *params), (x(),))
    mean, precision = gaussian_args(4, device)
    cases["gaussian_energy"] = (ebm.gaussian_energy, (x(), mean, precision))
    cases["gaussian_score"] = (ebm.gaussian_score, (x(), mean.detach().clone().requires_grad_(),
                                                    precision.detach().clone().requires_grad_()))
    return cases


@pytest.mark.parametrize("name", [f"{m}_{k}" for m in ["gaussian", *EBM_PARAMS] for k in ("energy", "score")])
def test_ebm_energies_and_scores_have_second_derivatives(device, name):
    fn, args = ebm_cases(device)[name]
    assert torch.autograd.gradcheck(fn, args)
    assert torch.autograd.gradgradcheck(fn, args)


@pytest.mark.parametrize("model", ["gaussian", *EBM_PARAMS])
def test_a_score_matching_loss_matches_the_reference(device, model):
    """The case that was silently wrong: a loss on the gradient of the energy (create_graph=True),
    differentiated again. Against autograd of reference.py's energy."""
    x = rand(6, 4, device=device)
    if model == "gaussian":
        mean, precision = gaussian_args(4, device)
        params, ours_energy = (mean, precision), ebm.gaussian_energy
    else:
        params, ours_energy = EBM_PARAMS[model], getattr(ebm, f"{model}_energy")
    ref_energy = ebm.reference.ENERGIES[model]
    tensors = [x, *(p for p in params if isinstance(p, torch.Tensor))]

    def loss_grads(energy):
        (g,) = torch.autograd.grad(energy(x, *params).sum(), x, create_graph=True)
        loss = 0.5 * (g * g).sum() - (x * g).sum()  # a score-matching-like loss: needs ∂g/∂x and ∂g/∂θ
        return torch.autograd.grad(loss, tensors)

    for ours, expected in zip(loss_grads(ours_energy), loss_grads(ref_energy)):
        torch.testing.assert_close(ours, expected, rtol=1e-9, atol=1e-9)


def other_cases(device):
    """The differentiable ops outside ebm's energies and scores (the steps are in step_cases)."""
    cases = {
        "relu_add": (lambda x, y: fused.relu_add(x, y, 0.5), (rand(6, device=device), rand(6, device=device))),
        "langevin_step": (lambda x, g: ebm.langevin_step(x, g, 0.1, 0.0, clamp=(-1.0, 1.0)),
                          (rand(4, 3, device=device), rand(4, 3, device=device))),
        "kron": (linalg.kron, (rand(2, 3, device=device), rand(3, 2, device=device))),
        "per_sample_grad_linear": (linalg.per_sample_grad_linear, (rand(3, 4, device=device), rand(3, 2, device=device))),
        "conv1d_gn_mish": (lambda x, w, b, gw, gb: diffusion.conv1d_gn_mish(x, w, b, gw, gb, 2),
                           (rand(2, 4, 5, device=device), rand(4, 4, 3, device=device), rand(4, device=device),
                            rand(4, device=device), rand(4, device=device))),
    }
    # A symmetric argument (only symmetric perturbations are meaningful: the backward goes through eigh)
    a = torch.randn(5, 10, dtype=F64, device=device)
    spd = (a @ a.T / 10 + 0.5 * torch.eye(5, dtype=F64, device=device)).requires_grad_()
    cases["matrix_inverse_root"] = (lambda b: linalg.matrix_inverse_root(0.5 * (b + b.mT), 4, 1e-3), (spd,))
    return cases


def test_ackley_derivatives_at_its_minimum_are_the_subgradients(device):
    """At a row of zeros (Ackley's minimum; in float32 also rows whose squares underflow) the score takes
    the subgradient of the sqrt term, 0. Its derivatives must follow that in every mode: the reference's
    plain sqrt made them NaN, in rows the loss never used too (session 40's review)."""
    from torch.func import jacfwd, jacrev

    x = torch.tensor([[0.5, 0.2, -0.1], [0.0, 0.0, 0.0]], dtype=F64, device=device, requires_grad=True)
    (ebm.ackley_score(x)[0] ** 2).sum().backward()  # the loss uses row 0 only
    assert torch.isfinite(x.grad).all() and (x.grad[1] == 0).all()
    tiny = torch.tensor([[1e-30, 2e-30, 0.0]], device=device, requires_grad=True)  # x² underflows in float32
    (grad,) = torch.autograd.grad(ebm.ackley_energy(tiny).sum(), tiny, create_graph=True)
    grad.pow(2).sum().backward()
    assert torch.isfinite(tiny.grad).all()
    zero = torch.zeros(1, 3, dtype=F64, device=device)
    for op in (ebm.ackley_energy, ebm.ackley_score):
        reverse, forward = jacrev(op)(zero), jacfwd(op)(zero)
        assert torch.isfinite(reverse).all()
        torch.testing.assert_close(reverse, forward)


def test_other_differentiable_ops_have_second_derivatives(device):
    for name, (fn, args) in other_cases(device).items():
        assert torch.autograd.gradgradcheck(fn, args), name


def test_batched_gradients_of_other_ops(device):
    """torch's legacy vmap runs a backward once for a batch of grad_outputs (autograd.grad(is_grads_batched=True),
    gradcheck's check_batched_grad, autograd.functional.jacobian(vectorize=True)). kron's and
    per_sample_grad_linear's backwards were einsums, which it has no rule for: they raised (session 53's review)."""
    for name, (fn, args) in other_cases(device).items():
        if name == "matrix_inverse_root":  # eigh's backward has no legacy batching rule either (torch's own)
            continue
        assert torch.autograd.gradcheck(fn, args, check_batched_grad=True), name


def test_backward_under_compiled_autograd(device):
    """Compiled autograd traces each node of the backward graph; it asks an autograd.Function's class for
    `_compiled_autograd_key`, which the loader's single-level Functions lacked: every op's backward raised
    AttributeError under it (session 53's review)."""
    ca = pytest.importorskip("torch._dynamo.compiled_autograd")
    if not hasattr(ca, "_enable"):
        pytest.skip("this torch has no compiled_autograd._enable")
    x4 = rand(3, 4, device=device)
    mean, precision = gaussian_args(4, device)
    cases = {name: other_cases(device)[name] for name in ("relu_add", "kron", "conv1d_gn_mish", "matrix_inverse_root")}
    cases["gaussian_energy"] = (ebm.gaussian_energy, (x4, mean, precision))
    cases["ackley_score"] = (ebm.ackley_score, (rand(3, 4, device=device),))
    sched = schedule(device)
    t = torch.tensor([5, 11], device=device)
    cases["ddpm_step"] = (lambda m, x, z: diffusion.ddpm_step(m, t, x, sched, z),
                          tuple(rand(2, 3, device=device) for _ in range(3)))
    for name, (fn, args) in cases.items():
        inputs = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        expected = torch.autograd.grad(fn(*args).pow(2).sum(), inputs)
        for a in inputs:
            a.grad = None
        with ca._enable(torch.compile(backend="aot_eager")):
            fn(*args).pow(2).sum().backward()
        for a, e in zip(inputs, expected):
            torch.testing.assert_close(a.grad, e, msg=name)
            a.grad = None


@pytest.mark.parametrize("t", [7, "0-d", "per row"])
def test_steps_linearize(device, t):
    """torch.func.linearize traces the forward formula: reference.py indexed the schedule with ac[t], which
    reads a 0-d index tensor on the host (.item()), so linearize of ddpm_step and ddim_step raised even for
    an int t (the op makes it a tensor; session 53's review)."""
    from torch.func import jvp, linearize

    sched = schedule(device)
    t = {"0-d": torch.tensor(7, device=device), "per row": torch.tensor([7, 12, 3], device=device)}.get(t, t)
    m, x, z, tangent = (torch.randn(3, 4, dtype=F64, device=device) for _ in range(4))
    for ours, ref in ((diffusion.ddpm_step, diffusion.reference.ddpm_step),
                      (lambda m, t, x, s, z: diffusion.ddim_step(m, t, t - 1, x, s, 0.5, z),
                       lambda m, t, x, s, z: diffusion.reference.ddim_step(m, t, t - 1, x, s, 0.5, z))):
        value, jvp_fn = linearize(lambda m: ours(m, t, x, sched, z), m)
        ref_value, ref_tangent = jvp(lambda m: ref(m, t, x, sched, z), (m,), (tangent,))
        torch.testing.assert_close(value, ref_value)
        torch.testing.assert_close(jvp_fn(tangent), ref_tangent)


def schedule(device):
    return diffusion.ddpm_schedule(20, "squaredcos_cap_v2", device=device)


@pytest.mark.parametrize("prediction_type", ["epsilon", "v_prediction", "sample"])
@pytest.mark.parametrize("clip_sample", [True, False])
def test_ddpm_step_is_differentiable(device, prediction_type, clip_sample):
    sched = schedule(device)
    t = torch.tensor([0, 7, 19], device=device)  # per row, t = 0 (no noise) included
    m, x, z = rand(3, 2, 5, device=device), rand(3, 2, 5, device=device), rand(3, 2, 5, device=device)
    step = lambda m, x, z: diffusion.ddpm_step(m, t, x, sched, z, prediction_type, clip_sample, 1.5)  # noqa: E731
    assert torch.autograd.gradcheck(step, (m, x, z))
    assert torch.autograd.gradgradcheck(step, (m, x, z))
    # drawn noise is a constant: the gradients are those with any given noise
    g = torch.randn(3, 2, 5, dtype=F64, device=device)
    drawn = torch.autograd.grad(diffusion.ddpm_step(m, t, x, sched, None, prediction_type, clip_sample, 1.5), (m, x), g)
    given = torch.autograd.grad(step(m, x, z), (m, x), g)
    for a, b in zip(drawn, given):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("eta", [0.0, 0.7])
@pytest.mark.parametrize("use_clipped_model_output", [True, False])
def test_ddim_step_is_differentiable(device, eta, use_clipped_model_output):
    sched = schedule(device)
    t, t_prev = torch.tensor([3, 19], device=device), torch.tensor([-1, 10], device=device)
    m, x, z = rand(2, 6, device=device), rand(2, 6, device=device), rand(2, 6, device=device)

    def step(m, x, z):
        return diffusion.ddim_step(m, t, t_prev, x, sched, eta, z, "epsilon", True, 1.0, True, use_clipped_model_output)

    assert torch.autograd.gradcheck(step, (m, x, z))
    assert torch.autograd.gradgradcheck(step, (m, x, z))


def test_ddim_step_with_eta_0_has_zero_gradient_in_noise_alone(device):
    """eta = 0 never reads the noise. With only the noise requiring grad, the backward's formula came out with
    no graph at all, and the backward raised torch's "element 0 of tensors does not require grad and does not
    have a grad_fn" (session 45's derivative review); torch.func.grad gave zeros. Both give zeros now."""
    sched = schedule(device)
    m, x, z = rand(2, 6, device=device, grad=False), rand(2, 6, device=device, grad=False), rand(2, 6, device=device)
    step = lambda z: diffusion.ddim_step(m, 7, 3, x, sched, 0.0, z)  # noqa: E731
    (g,) = torch.autograd.grad(step(z).sum(), z)
    assert (g == 0).all()
    assert (torch.func.grad(lambda z: step(z).sum())(z.detach()) == 0).all()
    (g,) = torch.autograd.grad(step(z).sum(), z, create_graph=True)
    assert (g == 0).all()


def test_create_graph_with_one_input_computed_from_another_matches_the_reference(device):
    """model_output = net(sample), as in every denoising loop: with create_graph=True the backward took
    autograd.grad from the inputs themselves, which also followed net's path from model_output back to sample,
    and autograd then added that path once more (ddpm_step's gradient in sample came out 0.695 for 0.667, its
    second derivative -1.01 for -0.68; gaussian_score(x, x[0], P) had x's gradient doubled) (session 45's
    derivative review)."""
    sched = schedule(device)
    net = torch.nn.Linear(3, 3).to(F64).to(device)
    x, z = rand(4, 3, device=device), rand(4, 3, device=device, grad=False)
    precision = torch.eye(3, dtype=F64, device=device) + 0.1 * rand(3, 3, device=device, grad=False)
    cases = {
        "ddpm_step": lambda ops: ops.ddpm_step(net(x), 5, x, sched, z, clip_sample=False),
        "ddim_step": lambda ops: ops.ddim_step(net(x), 5, 2, x, sched, 0.5, z, clip_sample=False),
        "gaussian_score": lambda ops: ops.gaussian_score(x, x[0], precision),
    }
    for name, step in cases.items():
        def derivatives(ops):
            (g,) = torch.autograd.grad(step(ops).pow(2).sum(), x, create_graph=True)
            return g, *torch.autograd.grad(g.pow(2).sum(), (x, net.weight), allow_unused=True)

        ref = diffusion.reference if name != "gaussian_score" else ebm.reference
        ours_ops = diffusion if name != "gaussian_score" else ebm
        for got, expected in zip(derivatives(ours_ops), derivatives(ref)):
            if expected is None:
                assert got is None, name
            else:
                torch.testing.assert_close(got, expected, msg=name)


def test_steps_are_not_differentiable_in_the_schedule(device):
    sched = schedule(device).requires_grad_()
    m, x = rand(2, 3, device=device), rand(2, 3, device=device, grad=False)
    out = diffusion.ddpm_step(m, 5, x, sched, torch.zeros_like(x))
    with pytest.raises(RuntimeError, match="not in schedule"):
        out.sum().backward()


@needs_cuda
def test_step_gradients_of_rows_with_an_invalid_timestep_are_nan():
    """On the GPU an out-of-range t is not read by the host: the forward gives NaN rows, and so does the
    backward, which must not index the schedule out of bounds either."""
    sched = schedule("cuda")
    t = torch.tensor([4, 20, -3], device="cuda")
    m = rand(3, 4, device="cuda")
    out = diffusion.ddpm_step(m, t, torch.randn(3, 4, dtype=F64, device="cuda"), sched)
    (g,) = torch.autograd.grad(out.sum(), m)
    assert torch.isfinite(g[0]).all() and torch.isnan(g[1:]).all()
    t_prev = torch.tensor([-1, 5, 2], device="cuda")  # rows 1 (t_prev >= t) and 2 (t < 0) invalid
    out = diffusion.ddim_step(m, torch.tensor([4, 5, -1], device="cuda"), t_prev, torch.zeros(3, 4, dtype=F64, device="cuda"), sched)
    (g,) = torch.autograd.grad(out.sum(), m)
    assert torch.isfinite(g[0]).all() and torch.isnan(g[1:]).all()
    torch.cuda.synchronize()


def test_differentiable_ops_compile_with_gradients():
    """torch.compile traces the backward formulas, vjp_by_autograd's nested autograd included."""
    x, ref = rand(5, 3), ebm.reference

    def f(x):
        return (ebm.rastrigin_score(x, 5.0) ** 2).sum() + ebm.harmonic_energy(x, 2.0).sum()

    (expected,) = torch.autograd.grad((ref.rastrigin_score(x, 5.0) ** 2).sum() + ref.harmonic_energy(x, 2.0).sum(), x)
    (got,) = torch.autograd.grad(torch.compile(f, fullgraph=True)(x), x)
    torch.testing.assert_close(got, expected)

    sched, t = schedule("cpu"), torch.tensor([0, 5, 19])
    m, sample, z = rand(3, 4), rand(3, 4, grad=False), rand(3, 4, grad=False)

    def steps(step_ops, m):
        return ((step_ops.ddpm_step(m, t, sample, sched, z) ** 2).sum() +
                (step_ops.ddim_step(m, t, t - 1, sample, sched) ** 2).sum())

    (expected,) = torch.autograd.grad(steps(diffusion.reference, m), m)
    (got,) = torch.autograd.grad(torch.compile(lambda m: steps(diffusion, m), fullgraph=True)(m), m)
    torch.testing.assert_close(got, expected)


# ---------------------------------------------------------------- torch.func transforms

def step_cases(device):
    sched = schedule(device)
    t, t_prev = torch.tensor([0, 7, 19], device=device), torch.tensor([-1, 3, 10], device=device)
    m, x, z = rand(3, 2, 5, device=device), rand(3, 2, 5, device=device), rand(3, 2, 5, device=device)
    return {"ddpm_step": (lambda m, x, z: diffusion.ddpm_step(m, t, x, sched, z, "v_prediction"), (m, x, z)),
            "ddim_step": (lambda m, x, z: diffusion.ddim_step(m, t, t_prev, x, sched, 0.7, z), (m, x, z))}


def differentiable_cases(device):
    return {**ebm_cases(device), **other_cases(device), **step_cases(device)}


DIFFERENTIABLE = sorted(differentiable_cases("cpu"))


def _dot(tensors, weights):
    return sum((t * w).sum() for t, w in zip(tensors, weights) if t is not None)


def _zeros_for_none(grads, args):
    return [torch.zeros_like(a) if g is None else g for g, a in zip(grads, args)]


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_torch_func_vjp_and_its_derivative_match_autograd(device, name):
    """torch.func.vjp and grad of it (the transforms that jacrev, jacrev(jacrev) and vmap(grad) are made
    of) against torch.autograd on the same op. Until session 31 every op raised under them ("must
    override the setup_context staticmethod"), as torch.library's custom ops still do."""
    fn, args = differentiable_cases(device)[name]
    out = fn(*args)
    v = tuple(torch.randn_like(o) for o in out) if isinstance(out, tuple) else torch.randn_like(out)
    w = [torch.randn_like(a) for a in args]
    first = torch.autograd.grad(out, args, v, create_graph=True, allow_unused=True)
    first_dot_w = _dot(first, w)
    # an op linear in its inputs (relu_add, the harmonic score) has a first derivative that is constant
    second = torch.autograd.grad(first_dot_w, args, allow_unused=True) if first_dot_w.requires_grad else [None] * len(args)

    plain = [a.detach() for a in args]
    _, vjp_fn = torch.func.vjp(fn, *plain)
    for got, expected in zip(vjp_fn(v), _zeros_for_none(first, args)):
        torch.testing.assert_close(got, expected.detach())
    got_second = torch.func.grad(lambda *a: _dot(torch.func.vjp(fn, *a)[1](v), w), argnums=tuple(range(len(plain))))(*plain)
    for got, expected in zip(got_second, _zeros_for_none(second, args)):
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("model", ["gaussian", *EBM_PARAMS])
def test_torch_func_derivatives_of_energies_match_the_reference(device, model):
    """The forms researchers write: per-sample gradients by vmap(grad), Hessians by jacrev(jacrev),
    against the same transforms of reference.py's energy."""
    x = torch.randn(3, 4, dtype=F64, device=device)
    if model == "gaussian":
        mean, precision = (p.detach() for p in gaussian_args(4, device))
        params = (mean, precision)
        ours, ref = ebm.gaussian_energy, ebm.reference.ENERGIES[model]
    else:
        params, ours, ref = EBM_PARAMS[model], getattr(ebm, f"{model}_energy"), ebm.reference.ENERGIES[model]

    def per_sample_grad(energy):
        return torch.vmap(torch.func.grad(lambda xi: energy(xi[None], *params)[0]))(x)

    def hessians(energy):  # of the first sample's energy: reverse over reverse, and torch.func.hessian's
        one = lambda xi: energy(xi[None], *params)[0]  # noqa: E731  (forward over reverse)
        return torch.func.jacrev(torch.func.jacrev(one))(x[0]), torch.func.hessian(one)(x[0])

    torch.testing.assert_close(per_sample_grad(ours), per_sample_grad(ref))
    for got, expected in zip(hessians(ours), hessians(ref)):
        torch.testing.assert_close(got, expected)


def test_torch_func_transforms_compile():
    """torch.compile of the transforms: dynamo traces them, AOTAutograd meets our ops with functorch's
    tensors (forward mode's dual level is not the Python one there). Mixed with plain ops, so a tangent our
    op dropped would leave a silently partial result, not an error."""
    x, t, ref = torch.randn(8, 4, dtype=F64), torch.randn(8, 4, dtype=F64), ebm.reference

    def mixed(energy):
        return lambda y: energy(y, 5.0) + (y * y).sum(-1)

    cases = {
        "grad": lambda e: torch.func.grad(lambda y: mixed(e)(y).sum())(x),
        "vmap": lambda e: torch.vmap(mixed(e))(x[None].expand(3, 8, 4)),
        "jvp": lambda e: torch.func.jvp(mixed(e), (x,), (t,))[1],
        "hessian": lambda e: torch.func.hessian(lambda y: mixed(e)(y).sum())(x[:2]),
    }
    for name, case in cases.items():
        expected = case(ref.rastrigin_energy)
        torch.testing.assert_close(torch.compile(lambda: case(ebm.rastrigin_energy), fullgraph=True)(), expected,
                                   msg=name)


def drawing_calls(device):
    """One sample's call of each op that draws (its input shape as the lambda's first argument's)."""
    schedule = diffusion.ddpm_schedule(20, device=device)
    return {
        "normal": ((4,), lambda a: sampling.normal(a, a.abs() + 1, 3)),
        "langevin_step": ((5, 3), lambda a: ebm.langevin_step(a, a, 0.1)),
        "langevin_chain": ((5, 3), lambda a: ebm.langevin_chain(a, "harmonic", 2, 0.1)),
        "hmc_chain": ((5, 3), lambda a: ebm.hmc_chain(a, "harmonic", 2, 0.1, 2)[0]),
        "ddpm_step": ((2, 6), lambda a: diffusion.ddpm_step(a, 5, a, schedule)),
        "ddim_step": ((2, 6), lambda a: diffusion.ddim_step(a, 5, 3, a, schedule, eta=1.0)),
    }


@pytest.mark.parametrize("op", ["normal", "langevin_step", "langevin_chain", "hmc_chain", "ddpm_step", "ddim_step"])
def test_vmap_randomness_is_honoured_by_the_ops_that_draw(device, op):
    """As for torch's random ops: vmap's default randomness="error" raises, "different" gives each sample
    draws of its own, "same" gives every sample the draws one call outside vmap makes from that state.
    (torch's per-sample fallback gave "different" whatever was asked: session 40's review.)"""
    shape, call = drawing_calls(device)[op]
    x = torch.randn(*shape, device=device).expand(3, *shape)  # three equal samples
    with pytest.raises(RuntimeError, match="randomness"):
        torch.vmap(call)(x)
    different = torch.vmap(call, randomness="different")(x)
    assert not torch.equal(different[0], different[1])
    torch.manual_seed(7)
    same = torch.vmap(call, randomness="same")(x)
    after_vmap = torch.randn(2, device=device)
    torch.manual_seed(7)
    once = call(x[0])
    after_once = torch.randn(2, device=device)
    for sample in same:
        torch.testing.assert_close(sample, once, rtol=0, atol=0)
    torch.testing.assert_close(after_vmap, after_once, rtol=0, atol=0)  # the generator moved on as after one call
    if op in ("langevin_step", "ddpm_step", "ddim_step"):  # differentiable: vmap(grad) reaches jk.h's twin
        grad_of_sum = torch.func.grad(lambda a: call(a).sum())
        with pytest.raises(RuntimeError, match="randomness"):
            torch.vmap(grad_of_sum)(x)
        torch.vmap(grad_of_sum, randomness="different")(x)


@pytest.mark.parametrize("op", ["normal", "langevin_step", "langevin_chain", "hmc_chain", "ddpm_step", "ddim_step"])
def test_vmap_randomness_is_honoured_when_the_op_s_inputs_are_not_batched(device, op):
    """A call whose inputs are the same for every sample (vmap over something else: an ensemble's parameters,
    per-sample offsets) still draws once per sample, as torch.randn_like(unbatched) does: "error" raises,
    "different" gives each sample its own draws. No input batched, the op's FuncTorchBatched rule is never
    reached: "error" did not raise and "different" broadcast one call's draws to every sample (session 44)."""
    shape, call = drawing_calls(device)[op]
    a = torch.randn(*shape, device=device)
    offsets = torch.zeros(3, device=device)  # batched, but adds nothing: each sample's result is its draws

    def per_sample(offset):
        return call(a) + offset

    with pytest.raises(RuntimeError, match="randomness"):
        torch.vmap(per_sample)(offsets)
    different = torch.vmap(per_sample, randomness="different")(offsets)
    assert not torch.equal(different[0], different[1]) and not torch.equal(different[1], different[2])
    torch.manual_seed(7)
    same = torch.vmap(per_sample, randomness="same")(offsets)
    after_vmap = torch.randn(2, device=device)
    torch.manual_seed(7)
    once = call(a)
    after_once = torch.randn(2, device=device)
    for sample in same:
        torch.testing.assert_close(sample, once, rtol=0, atol=0)
    torch.testing.assert_close(after_vmap, after_once, rtol=0, atol=0)
    nested = torch.vmap(torch.vmap(per_sample, randomness="different"), randomness="same")(offsets.expand(2, 3))
    assert torch.equal(nested[0], nested[1]) and not torch.equal(nested[0, 0], nested[0, 1])


@pytest.mark.parametrize("op", ["normal_out", "langevin_step_"])
def test_vmap_of_an_in_place_draw_into_an_unbatched_tensor(device, op):
    """As torch's in-place random ops (buffer.normal_() under vmap): "error" raises, "different" raises (one
    unbatched tensor cannot hold a draw per sample), "same" writes one call's draws. Both ran once in every
    mode, "different" silently giving every sample the same draws (session 44)."""
    buffer = torch.zeros(4, 3, device=device)
    ones = torch.ones(3, device=device)
    write = {"normal_out": lambda: sampling.normal(ones * 0, ones, 4, out=buffer),
             "langevin_step_": lambda: ebm.langevin_step_(buffer, buffer, 0.1)}[op]
    offsets = torch.zeros(3, device=device)
    with pytest.raises(RuntimeError, match="randomness"):
        torch.vmap(lambda o: write() + o)(offsets)
    with pytest.raises(RuntimeError, match="different"):
        torch.vmap(lambda o: write() + o, randomness="different")(offsets)
    torch.manual_seed(7)
    same = torch.vmap(lambda o: write() + o, randomness="same")(offsets)
    written = buffer.clone()
    buffer.zero_()
    torch.manual_seed(7)
    torch.testing.assert_close(write(), written, rtol=0, atol=0)
    torch.testing.assert_close(same, written.expand(3, 4, 3), rtol=0, atol=0)
    if op == "normal_out":  # a batched out (a keyword) is not an unbatched tensor: vmap's own error names the op
        with pytest.raises(RuntimeError, match="Batching rule not implemented"):
            torch.vmap(lambda o: sampling.normal(ones * 0, ones, 4, out=o), randomness="different")(
                torch.empty(3, 4, 3, device=device))


@pytest.mark.parametrize("op", ["ddpm_step", "ddim_step", "ddim_step eta=0"])
def test_vmap_of_a_step_that_draws_nothing_needs_no_randomness_mode(device, op):
    """ddpm_step / ddim_step with their noise given (ddim_step also with eta = 0, which uses no noise) draw
    nothing, so vmap's default randomness="error" must not refuse them (it did, session 42's review), and each
    sample's result is that sample's own call; vmap(grad) too."""
    schedule = diffusion.ddpm_schedule(20, device=device)
    calls = {
        "ddpm_step": lambda a, z: diffusion.ddpm_step(a, 5, a * 0.5, schedule, noise=z),
        "ddim_step": lambda a, z: diffusion.ddim_step(a, 5, 3, a * 0.5, schedule, eta=1.0, noise=z),
        "ddim_step eta=0": lambda a, z: diffusion.ddim_step(a + z, 5, 3, a * 0.5, schedule),
    }
    call = calls[op]
    x, z = torch.randn(3, 2, 6, device=device), torch.randn(3, 2, 6, device=device)
    batched = torch.vmap(call)(x, z)
    torch.testing.assert_close(batched, torch.stack([call(x[b], z[b]) for b in range(3)]), rtol=0, atol=0)
    grads = torch.vmap(torch.func.grad(lambda a, z: call(a, z).sum()))(x, z)
    assert grads.shape == x.shape and torch.isfinite(grads).all()


@pytest.mark.parametrize("model", ["gaussian", *EBM_PARAMS])
@pytest.mark.parametrize("kind", ["energy", "score"])
def test_vmap_of_energies_and_scores_is_one_batched_call(device, model, kind):
    """ebm's vmap rules: vmapped batches of rows are one batch of rows (torch's fallback would call the
    op once per member, with a warning); a batched mean or precision is one call per member."""
    op = getattr(ebm, f"{model}_{kind}")
    for name in (f"{model}_{kind}", f"{model}_{kind}_autograd"):  # the op and its twin (vmap of grad meets it)
        # without a kernel at this key, torch's fallback runs (its warning is C++'s, which pytest cannot see)
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"{ebm.namespace}::{name}", "FuncTorchBatched")
    params = tuple(p.detach() for p in gaussian_args(3, device)) if model == "gaussian" else EBM_PARAMS[model]
    x = torch.randn(5, 7, 3, dtype=F64, device=device)
    by_vmap = torch.vmap(op, in_dims=(1, *[None] * len(params)))(x, *params)
    torch.testing.assert_close(by_vmap, torch.stack([op(x[:, i], *params) for i in range(7)]))
    if model == "gaussian":
        mean, precision = params[0] + torch.randn(4, 1, dtype=F64, device=device), params[1].expand(4, 3, 3)
        by_vmap = torch.vmap(op, in_dims=(None, 0, 0))(x[0], mean, precision)
        torch.testing.assert_close(by_vmap, torch.stack([op(x[0], m, precision[0]) for m in mean]))
    with pytest.raises(ValueError, match="x must be 2-D"):  # each member's x is checked as the op checks it
        torch.vmap(op, in_dims=(0, *[None] * len(params)))(x[0], *params)


FORWARD_MODE = [name for name in DIFFERENTIABLE if name != "matrix_inverse_root"]


@pytest.mark.parametrize("name", FORWARD_MODE)
def test_forward_mode_matches_reverse_mode(device, name):
    """torch.func.jvp and torch.autograd.forward_ad against torch.autograd.functional.jvp, which gets J·t from
    reverse mode (our backward formulas), and the primal against the op's own value. Until session 31 a
    tangent went through as if the op were constant: zeros, and torch.func.hessian of an energy all zeros."""
    fn, args = differentiable_cases(device)[name]
    plain = tuple(a.detach() for a in args)
    tangents = tuple(torch.randn_like(a) for a in plain)
    value, expected = torch.autograd.functional.jvp(fn, plain, tangents)
    primal, got = torch.func.jvp(fn, plain, tangents)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(primal, value, rtol=0, atol=0)  # the kernel's numbers, not the formula's
    with fwAD.dual_level():
        out = fn(*(fwAD.make_dual(a, t) for a, t in zip(plain, tangents)))
        got = tuple(fwAD.unpack_dual(o).tangent for o in out) if isinstance(out, tuple) else fwAD.unpack_dual(out).tangent
    torch.testing.assert_close(got, expected)


def test_forward_mode_without_a_formula_is_refused_by_name():
    """matrix_inverse_root has no forward-mode formula (eigh's is NaN where eigenvalues repeat, as at
    Shampoo's eps·I start); its error names the op and the argument."""
    a = torch.eye(3, dtype=F64)
    with pytest.raises(RuntimeError, match="matrix_inverse_root has no forward-mode derivative, but its argument 'A'"):
        torch.func.jvp(lambda b: linalg.matrix_inverse_root(b, 4, 1e-3), (a,), (a,))


def test_forward_mode_refuses_a_schedule_tangent():
    sched = schedule("cpu")
    m, x = torch.randn(2, 3, dtype=F64), torch.randn(2, 3, dtype=F64)
    with pytest.raises(RuntimeError, match="not in schedule"):
        torch.func.jvp(lambda s: diffusion.ddpm_step(m, 5, x, s, torch.zeros_like(x)), (sched,), (sched,))


@pytest.mark.parametrize("op", ["langevin_step_", "normal_out"])
def test_in_place_ops_refuse_forward_mode_tangents(device, op):
    call = in_place_calls(device)[op]
    with fwAD.dual_level():
        dual = fwAD.make_dual(torch.randn(4, 3, device=device), torch.randn(4, 3, device=device))
        with pytest.raises(RuntimeError, match=f"{op} has no forward-mode derivative"):
            call(dual, torch.randn(4, 3, device=device))


# ---------------------------------------------------------------- samplers: constants for autograd

def test_sampler_outputs_never_require_grad(device):
    x = torch.randn(6, 3, device=device, requires_grad=True)
    mean, precision = torch.zeros(3, device=device, requires_grad=True), torch.eye(3, device=device).requires_grad_()
    outputs = [
        *ebm.langevin_chain(x, "gaussian", 3, 0.1, thin=1, mean=mean, precision=precision),
        *ebm.hmc_chain(x, "harmonic", 2, 0.1, 2, thin=1, k=1.0),
        sampling.normal(mean, precision[0] + 1, 4),
        *sampling.cem_update(x, x.sum(1), 2, mean, precision[0] + 1),
    ]
    for out in outputs:
        assert not out.requires_grad and out.grad_fn is None


# Every op that draws random numbers (a Generator argument; the DDPM/DDIM steps draw from the default one).
DRAWING_OPS = {"normal", "normal_out", "langevin_step", "langevin_step_", "langevin_chain", "hmc_chain", "ddpm_step",
               "ddim_step"}


def test_every_op_that_draws_is_tagged_nondeterministic_seeded():
    """The tag tells torch.compile that a call cannot be run again for the same result: without it, its
    partitioner recomputed sampling.normal inside a checkpointed region during backward, with new draws,
    and the gradient belonged to samples the forward never used (session 40's review)."""
    found = set()
    for family in ("ebm", "sampling", "diffusion"):
        for qualname in registered_ops(family):
            name = qualname.split("::")[1]
            if name.endswith("_autograd"):  # jk.h's twin of a differentiable op: the same call, one key below
                name = name[: -len("_autograd")]
            packet = getattr(getattr(torch.ops, qualname.split("::")[0]), qualname.split("::")[1])
            schema = packet.default._schema
            if any(str(argument.type) == "Optional[Generator]" for argument in schema.arguments):
                assert name in DRAWING_OPS, f"{name} draws (a Generator argument): add it to DRAWING_OPS"
            if name in DRAWING_OPS:
                found.add(name)
                assert torch.Tag.nondeterministic_seeded in packet.default.tags, f"{qualname} lacks the tag"
                if name not in ("normal_out", "langevin_step_"):  # in place: vmap's own fallback writes slices
                    assert torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "FuncTorchBatched"), \
                        f"{qualname} has no vmap rule for vmap's randomness (loader.register_drawing_vmap)"
    assert found == DRAWING_OPS


def test_checkpointed_draws_are_not_drawn_again_under_compile(device):
    """torch.compile of a checkpointed region that draws: backward must see the forward's draws (with new
    ones, normal's gradient and langevin_step's clamp mask were computed for other samples)."""
    from torch.utils.checkpoint import checkpoint

    def region(m):
        z = sampling.normal(torch.zeros_like(m), torch.ones_like(m), 64)
        y = ebm.langevin_step(m.expand(64, -1) + z, torch.zeros(64, m.shape[0], device=m.device), 0.1, 1.0, (-1.0, 1.0))
        return y.sin().sum(), y

    def f(m):
        return checkpoint(region, m, use_reentrant=False)

    m = torch.randn(8, device=device, requires_grad=True)
    for fn in (f, torch.compile(f, fullgraph=True)):
        loss, y = fn(m)
        (grad,) = torch.autograd.grad(loss, m)
        inside = (y > -1) & (y < 1)  # the clamp passes the gradient where the output was not clipped
        torch.testing.assert_close(grad, (y.cos() * inside).sum(0))


# ---------------------------------------------------------------- in-place ops: never silently wrong

def in_place_calls(device):
    return {
        "langevin_step_": lambda x, other: ebm.langevin_step_(x, other, 0.1),
        "normal_out": lambda x, other: sampling.normal(other[0], other[0].abs() + 1, x.shape[0], out=x),
    }


@pytest.mark.parametrize("op", ["langevin_step_", "normal_out"])
def test_in_place_ops_refuse_tensors_that_require_grad(device, op):
    call = in_place_calls(device)[op]
    leaf = torch.randn(4, 3, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match=f"{op} writes in place and has no derivative"):
        call(leaf * 1, torch.randn(4, 3, device=device))
    with pytest.raises(RuntimeError, match="requires grad"):
        call(torch.zeros(4, 3, device=device), leaf)
    with torch.no_grad():  # where torch's in-place ops are allowed, so are ours
        call(leaf, torch.randn(4, 3, device=device))


@pytest.mark.parametrize("op", ["langevin_step_", "normal_out"])
def test_in_place_ops_bump_the_version_of_what_they_write(device, op):
    """A backward that saved the old values must raise, not use the new ones."""
    call = in_place_calls(device)[op]
    w = torch.randn(4, 3, device=device, requires_grad=True)
    x = torch.randn(4, 3, device=device)
    loss = (w * x).sum()  # saves x for w's gradient
    version = x._version
    call(x, torch.randn(4, 3, device=device))
    assert x._version > version
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.parametrize("op", ["langevin_step_", "normal_out"])
def test_in_place_ops_refuse_inference_tensors_before_writing(device, op):
    """Outside inference mode an inference tensor may not be written (torch's rule): the refusal used to
    come from the version bump after the write, with the tensor already changed (session 40's review)."""
    call = in_place_calls(device)[op]
    with torch.inference_mode():
        x = torch.zeros(4, 3, device=device)
    with pytest.raises(RuntimeError, match="inference"):
        call(x, torch.randn(4, 3, device=device))
    assert (x == 0).all()
    with torch.inference_mode():  # where it is allowed
        call(x, torch.randn(4, 3, device=device))
    assert not (x == 0).all()


def test_in_place_ops_compile(device):
    """torch.compile functionalizes them (a custom op whose output aliases an input it cannot)."""

    def f(x, g, out):
        ebm.langevin_step_(x, g, 0.1, 0.0)
        sampling.normal(x[0], x[0].abs() + 1, out.shape[0], out=out)
        return x + 1

    x, g = torch.randn(4, 3, device=device), torch.randn(4, 3, device=device)
    x_compiled, out_eager, out_compiled = x.clone(), torch.empty(5, 3, device=device), torch.empty(5, 3, device=device)
    torch.manual_seed(1)
    expected = f(x, g, out_eager)
    torch.manual_seed(1)
    got = torch.compile(f, fullgraph=True)(x_compiled, g, out_compiled)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(x_compiled, x)
    assert torch.isfinite(out_compiled).all() and out_compiled.std() > 0


def _float_argument_calls():
    """(call(value), argument name) for the float arguments of diffusion's and linalg's differentiable ops
    (ebm's: tests/test_ebm.py)."""
    x = torch.randn(2, 3, 5, dtype=F64)
    schedule = diffusion.ddpm_schedule(10)
    t = torch.tensor(5)
    w, ones, zeros = torch.randn(4, 3, 3, dtype=F64), torch.ones(4, dtype=F64), torch.zeros(4, dtype=F64)
    A = torch.eye(3, dtype=F64) + 0.1
    return [
        (lambda v: diffusion.ddpm_step(x, t, x, schedule, noise=x, clip_sample_range=v), "clip_sample_range"),
        (lambda v: diffusion.ddim_step(x, t, 2, x, schedule, eta=v, noise=x), "eta"),
        (lambda v: diffusion.ddim_step(x, t, 2, x, schedule, clip_sample_range=v), "clip_sample_range"),
        (lambda v: diffusion.conv1d_gn_mish(x, w, None, ones, zeros, 2, eps=v), "eps"),
        (lambda v: linalg.matrix_inverse_root(A, 2, v, fallback="never"), "eps"),
        (lambda v: linalg.matrix_inverse_root(A, 2, v, fallback="always"), "eps"),
        (lambda v: linalg.matrix_inverse_root(A, 2, 1e-6, max_cond=v), "max_cond"),
    ]


@pytest.mark.parametrize("index", range(len(_float_argument_calls())))
def test_a_float_argument_that_carries_a_derivative_is_refused_by_name(index):
    """A schema's float reads a tensor as a number, so ddim_step(..., eta=p) with p an nn.Parameter left p.grad
    None (reference.py's formula gives it one) and conv1d_gn_mish's and matrix_inverse_root's eps lost theirs
    (on matrix_inverse_root's eigh route it had one): refused by name, as in ebm (loader.check_numbers)."""
    call, name = _float_argument_calls()[index]
    value = torch.tensor(0.5 if name != "max_cond" else 1e4, dtype=F64)
    torch.testing.assert_close(call(value), call(value.item()))
    with pytest.raises(TypeError, match=rf"\b{name}\b.*detach"):
        call(value.clone().requires_grad_())
    with fwAD.dual_level(), pytest.raises(TypeError, match=rf"\b{name}\b"):
        call(fwAD.make_dual(value, torch.ones_like(value)))


# ---------------------------------------------------------------- session 47: every float argument, every family

def _number_argument_calls():
    """(call(value), argument name) for each float argument that the session-44 checks left out: langevin_step_ (the
    in-place step), the chains' step sizes and model parameters, both steps' clamp bounds, cem_update's and
    cem_minimize's smoothing / min_std, ddpm_schedule's betas. A tensor with a derivative was read as a number and
    its derivative dropped, with at most torch's warning."""
    ebm, sampling = loader.load("ebm"), loader.load("sampling")
    x = torch.randn(4, 3, dtype=F64)
    samples, scores, mean, std = torch.randn(6, 3, dtype=F64), torch.randn(6, dtype=F64), torch.zeros(3, dtype=F64), \
        torch.ones(3, dtype=F64)

    def quiet(call):  # the steps and chains draw: the same draws for the tensor and the number
        def seeded(v):
            torch.manual_seed(0)
            return call(v)
        return seeded

    return [
        (quiet(lambda v: ebm.langevin_step_(x.clone(), x, v)), "step_size"),
        (quiet(lambda v: ebm.langevin_step_(x.clone(), x, 0.1, v)), "noise_scale"),
        (quiet(lambda v: ebm.langevin_step_(x.clone(), x, 0.1, clamp=v)), "clamp"),
        (quiet(lambda v: ebm.langevin_step(x, x, 0.1, clamp=v)), "clamp"),
        (quiet(lambda v: ebm.langevin_step(x, x, 0.1, clamp=(-v, None))), r"clamp\[0\]"),
        (quiet(lambda v: ebm.langevin_step(x, x, 0.1, clamp=(None, v))), r"clamp\[1\]"),
        (quiet(lambda v: ebm.langevin_chain(x, "harmonic", 3, v)), "step_size"),
        (quiet(lambda v: ebm.langevin_chain(x, "harmonic", 3, 0.1, v)), "noise_scale"),
        (quiet(lambda v: ebm.langevin_chain(x, "harmonic", 3, 0.1, clamp=v)), "clamp"),
        (quiet(lambda v: ebm.langevin_chain(x, "harmonic", 3, 0.1, k=v)), "k"),
        (quiet(lambda v: ebm.hmc_chain(x, "harmonic", 3, v)), "step_size"),
        (quiet(lambda v: ebm.hmc_chain(x, "double_well", 3, 0.1, b=v)), "b"),
        (lambda v: sampling.cem_update(samples, scores, 3, mean, std, smoothing=v), "smoothing"),
        (lambda v: sampling.cem_update(samples, scores, 3, mean, std, min_std=v), "min_std"),
        (quiet(lambda v: sampling.cem_minimize(lambda s: s.sum(-1), mean, std, 6, 3, 2, smoothing=v)), "smoothing"),
        (lambda v: diffusion.ddpm_schedule(10, beta_start=v / 1000), "beta_start"),
        (lambda v: diffusion.ddpm_schedule(10, beta_end=v / 10), "beta_end"),
        (lambda v: diffusion.gn_mish_backward(x.T[None], x.T[None] + 1, mean, std, 3, eps=v), "eps"),
    ]


@pytest.mark.parametrize("index", range(len(_number_argument_calls())))
def test_every_op_refuses_a_number_argument_that_carries_a_derivative(index):
    """loader.langevin_step_(x, grad, step_size=p) with p an nn.Parameter gave torch's warning and left p.grad None;
    the chains, the clamp bounds, cem_update and ddpm_schedule gave not even the warning (session 46's API review).
    Refused by name as every other float argument is (loader.check_numbers); a tensor without one is a number."""
    call, name = _number_argument_calls()[index]
    value = torch.tensor(0.5, dtype=F64)
    torch.testing.assert_close(call(value), call(0.5))
    with pytest.raises(TypeError, match=rf"{name} is read as a number.*detach"):
        call(value.clone().requires_grad_())
    with fwAD.dual_level(), pytest.raises(TypeError, match=rf"{name} is read as a number"):
        call(fwAD.make_dual(value, torch.ones_like(value)))


# Where each schema float argument's refusal is tested (clamp_min / clamp_max are clamp's bounds, params the chains'
# model parameters). A new float argument fails the test below until its face refuses a derivative and is listed.
_NUMBER_ARGUMENT_TESTS = {
    "test_ebm.py": {f"{model}_{kind}.{name}" for model, params in ebm.MODELS.items() for kind in ("energy", "score")
                    for name in params} | {"langevin_step.step_size", "langevin_step.noise_scale"},
    "test_fused.py": {"relu_add.bias"},  # a 0-d tensor bias is differentiable there
    "_float_argument_calls": {"ddpm_step.clip_sample_range", "ddim_step.eta", "ddim_step.clip_sample_range",
                              "conv1d_gn_mish.eps", "matrix_inverse_root.eps", "matrix_inverse_root.max_cond"},
    "_number_argument_calls": {"langevin_step_.step_size", "langevin_step_.noise_scale", "langevin_step_.clamp_min",
                               "langevin_step_.clamp_max", "langevin_step.clamp_min", "langevin_step.clamp_max",
                               "langevin_chain.step_size", "langevin_chain.noise_scale", "langevin_chain.clamp_min",
                               "langevin_chain.clamp_max", "langevin_chain.params", "hmc_chain.step_size",
                               "hmc_chain.params", "cem_update.smoothing", "cem_update.min_std",
                               "ddpm_schedule.beta_start", "ddpm_schedule.beta_end", "gn_mish_backward.eps"},
}


def test_every_float_argument_of_every_op_has_a_refusal_test():
    """The session-44 checks were added face by face, and langevin_step_, the chains, cem_update and ddpm_schedule
    were missed: every float argument of every family's schemas must be in _NUMBER_ARGUMENT_TESTS."""
    in_schemas = set()
    for family in ("ebm", "sampling", "diffusion", "fused", "linalg"):
        for qualname in registered_ops(family):
            op = qualname.split("::")[1]
            if op.endswith("_autograd"):  # jk::def_differentiable's twin: the same arguments
                continue
            for argument in torch._C._get_schema(qualname, "").arguments:
                if "float" in str(argument.type).lower():
                    in_schemas.add(f"{op}.{argument.name}")
    listed = set().union(*_NUMBER_ARGUMENT_TESTS.values())
    assert in_schemas - listed == set(), "float arguments with no refusal test"
    assert listed - in_schemas == set(), "listed arguments that no schema has"
