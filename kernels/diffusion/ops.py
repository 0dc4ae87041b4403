"""Diffusion-policy kernels: DDPM / DDIM scheduler steps and fused Conv1d + GroupNorm + Mish.

    sched = ddpm_schedule(100, "squaredcos_cap_v2", device="cuda")
    x = ddpm_step(eps, t, x, sched)          # t: int, or an int tensor on the device (CUDA-graph safe)
    h = conv1d_gn_mish(x, conv.weight, conv.bias, gn.weight, gn.bias, 8)

The step ops read everything they need from the (T, 8) float64 schedule table and the timestep
tensor on the device, so a whole denoising loop can be captured in one CUDA graph; noise is drawn
inside the kernel from PyTorch's generator (torch.manual_seed reproduces it, graph replays draw
fresh numbers). Out-of-range timesteps are an error when they are host-readable (Python ints, CPU
tensors); timesteps living on the GPU are not read by the host, so rows with an invalid one come
back as NaN (never zeros, never an out-of-bounds read). Shapes for fake tensors (torch.compile,
opcheck) come from each op's Meta kernel in diffusion.cpp.
"""
import operator
from collections.abc import Callable

import torch
import torch.nn.functional as F

NAMESPACE: str  # the build's op namespace, set by loader.py before this file runs
register_autograd: Callable  # loader.register_autograd, set beside it: torch.library.register_autograd's
                             # signature at a fraction of its load time
vjp_by_autograd: Callable    # loader.vjp_by_autograd: a backward by autograd of a PyTorch formula
load_reference: Callable     # this family's reference.py, imported on the first call
check_numbers: Callable      # loader.check_numbers: refuses a float argument given as a tensor with a derivative
register_drawing_vmap: Callable  # loader.register_drawing_vmap: vmap's randomness for an op that draws
_ops = getattr(torch.ops, NAMESPACE)

__all__ = ["ddpm_schedule", "ddpm_step", "ddim_step", "conv1d_gn_mish", "gn_mish_backward", "SCHEDULE_COLUMNS"]

# Columns of the schedule table (see diffusion.h), exported: ddpm_schedule's docstring sends the reader here.
SCHEDULE_COLUMNS = (
    "beta", "alphas_cumprod", "sqrt_alphas_cumprod", "sqrt_one_minus_alphas_cumprod", "rsqrt_alphas_cumprod",
    "posterior_coef_x0", "posterior_coef_xt", "posterior_std",
)


def _as_timestep(t, name: str) -> torch.Tensor:
    """Python ints become CPU int64 scalars: read and range-checked on the host, no device copy. Anything
    else but a tensor is refused by name (a float was truncated, None and lists raised int()'s error). A
    tensor-like (torch.fx's Proxy, a __torch_function__ wrapper) goes to the op as a tensor does."""
    if torch.overrides.is_tensor_like(t):
        return t
    if isinstance(t, bool):  # an int to Python: t=True stepped from timestep 1
        raise TypeError(f"{name} must be an int or an integer tensor, got bool {t!r}")
    # device="cpu": under torch.set_default_device("cuda") an int became a device tensor, read on the device
    # (t out of range gave NaN instead of a ValueError) and copied there (refused inside a CUDA graph capture)
    if isinstance(t, (int, torch.SymInt)):  # not operator.index: under torch.compile it pinned each value of a
        return torch.tensor(t, dtype=torch.int64, device="cpu")  # varying t (a graph per timestep; past 8, an error)
    try:  # other integers (numpy's)
        return torch.tensor(operator.index(t), dtype=torch.int64, device="cpu")
    except TypeError:
        raise TypeError(f"{name} must be an int or an integer tensor, got {type(t).__name__} {t!r}") from None


def ddpm_schedule(num_train_timesteps: int = 1000, beta_schedule: str = "linear", beta_start: float = 1e-4,
                  beta_end: float = 0.02, device: torch.device | str | None = None) -> torch.Tensor:
    """The (T, 8) float64 table of per-timestep constants that ddpm_step / ddim_step read.

    beta_schedule: "linear", "scaled_linear" or "squaredcos_cap_v2" (as diffusers; computed in
    float64). Columns: SCHEDULE_COLUMNS (beta, alphas_cumprod, their square roots, and the DDPM
    posterior coefficients and "fixed_small" standard deviation). Computed on the CPU, then moved to
    `device` (default: torch's default device, as for torch's factory functions, so a notebook under
    torch.set_default_device("cuda") gets a table on the GPU).
    """
    check_numbers(beta_start=beta_start, beta_end=beta_end)
    table = _ops.ddpm_schedule(num_train_timesteps, beta_schedule, beta_start, beta_end)
    return table.to(torch.get_default_device() if device is None else device)


def ddpm_step(model_output: torch.Tensor, t, sample: torch.Tensor, schedule: torch.Tensor,
              noise: torch.Tensor | None = None, prediction_type: str = "epsilon", clip_sample: bool = True,
              clip_sample_range: float = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
    """One DDPM reverse step x_t -> x_{t-1}: the numbers of diffusers' DDPMScheduler.step with
    variance_type="fixed_small", prev_t being the schedule table's previous row (strided inference
    timesteps: pass a strided table, below).

    model_output, sample (, noise): same shape (B, ...), dtype and device; float32, float64,
    float16 or bfloat16 (half types compute in float32). t: int, or an int32/int64 tensor holding a
    scalar or one timestep per batch row, on the sample's device (read there) or a CPU scalar.
    schedule: ddpm_schedule(...) on the sample's device, or rows of one (S[k:], or S[::k] for strided
    inference; S[index_tensor] for other spacings), rows in ascending timestep order: the step goes
    from row t to row t - 1 of the table given, from its alphas_cumprod column, and row 0 is the final
    step (alpha_prod_prev = 1, no noise), as diffusers. A table in diffusers' descending `timesteps`
    order would step the wrong way: where alphas_cumprod rises from row t - 1 to row t, a CPU table
    raises ValueError and a GPU one (not read by the host) gives that row NaN.
    prediction_type: "epsilon", "v_prediction" or "sample"; the predicted x0 is clamped to
    +-clip_sample_range when clip_sample. Noise sigma_t*z is added for t > 0, z drawn in the kernel
    unless `noise` is given, from `generator` (a torch.Generator on the sample's device; default: the
    device's default generator, so torch.manual_seed reproduces it). Returns a new contiguous tensor.
    Differentiable in model_output, sample and noise (not schedule): the backward is autograd of
    reference.py's formula (PyTorch ops), with drawn noise a constant, so a loss on a denoised result
    can reach the model through the whole sampling loop.

    Out-of-range t raises ValueError when the host can read it (Python int, CPU tensor). A t tensor on
    the GPU is not read by the host (that would sync): rows whose t is outside [0, T) come back as NaN
    (never clamped, never zeros); the schedule is never read out of bounds.
    """
    check_numbers(clip_sample_range=clip_sample_range)
    return _ops.ddpm_step(model_output, _as_timestep(t, "t"), sample, schedule, noise, prediction_type, clip_sample,
                          clip_sample_range, generator)


def ddim_step(model_output: torch.Tensor, t, t_prev, sample: torch.Tensor, schedule: torch.Tensor, eta: float = 0.0,
              noise: torch.Tensor | None = None, prediction_type: str = "epsilon", clip_sample: bool = True,
              clip_sample_range: float = 1.0, set_alpha_to_one: bool = True,
              use_clipped_model_output: bool = False, generator: torch.Generator | None = None) -> torch.Tensor:
    """One DDIM step x_t -> x_{t_prev}: the numbers of diffusers' DDIMScheduler.step.

    Same conventions as ddpm_step; t_prev (int or tensor like t) must be in [-1, t), -1 meaning the
    final step, whose alpha_cumprod is 1 (set_alpha_to_one) or row 0's of the table given. eta scales the
    noise (0: deterministic DDIM; noise is only drawn or read when eta > 0). Differentiable as
    ddpm_step.
    Out-of-range t / t_prev on the GPU give NaN rows, as in ddpm_step; on the host they raise.
    """
    check_numbers(eta=eta, clip_sample_range=clip_sample_range)
    return _ops.ddim_step(model_output, _as_timestep(t, "t"), _as_timestep(t_prev, "t_prev"), sample, schedule, eta, noise,
                          prediction_type, clip_sample, clip_sample_range, set_alpha_to_one, use_clipped_model_output,
                          generator)


# The steps' derivatives: autograd of reference.py's formulas. Noise enters linearly, so drawn noise (a
# constant) is zeros there. Timesteps on the GPU that are outside the schedule gave NaN rows in the
# forward: the formula gets valid ones instead (no out-of-bounds index) and those rows' gradients are NaN.

def _step_setup(ctx, inputs, output):
    ctx.tensor_positions = [i for i, a in enumerate(inputs) if isinstance(a, torch.Tensor)]
    ctx.save_for_backward(*(inputs[i] for i in ctx.tensor_positions))
    ctx.other_inputs = [None if isinstance(a, torch.Tensor) else a for a in inputs]


def _saved_inputs(ctx) -> list:
    inputs = list(ctx.other_inputs)
    for i, tensor in zip(ctx.tensor_positions, ctx.saved_tensors):
        inputs[i] = tensor
    return inputs


def _schedule_not_differentiable(name):
    return RuntimeError(f"{name} is differentiable in model_output, sample and noise, not in schedule: "
                        "pass schedule.detach()")


def _step_gradients(ctx, grad, name, formula, valid, model_output, sample, noise, positions):
    """(grad model_output, grad sample, grad noise) of <grad, formula(model_output, sample, noise)>, NaN in
    the rows where `valid` (a scalar or one per row) is false. positions: those inputs' and the schedule's
    places in the op's arguments."""
    if ctx.needs_input_grad[positions[3]]:
        raise _schedule_not_differentiable(name)
    z = torch.zeros_like(sample) if noise is None else noise
    needs = [ctx.needs_input_grad[i] for i in positions[:3]]
    grads = vjp_by_autograd(formula, (model_output, sample, z), needs, grad)
    if valid.dim() == 1:
        valid = valid.view(-1, *([1] * (sample.dim() - 1)))
    return [None if g is None else torch.where(valid.to(g.device), g, float("nan")) for g in grads]


def _ddpm_formula(t, schedule, options):
    """(formula(m, x, z): the reference's step with valid timesteps, valid) for a ddpm_step call."""
    valid = (t >= 0) & (t < schedule.shape[0])
    t = torch.where(valid, t, 0)
    return (lambda m, x, z: load_reference().ddpm_step(m, t, x, schedule, z, *options)), valid


def _ddim_formula(t, t_prev, schedule, eta, options):
    """(formula(m, x, z), valid) for a ddim_step call, as _ddpm_formula."""
    valid = (t >= 0) & (t < schedule.shape[0]) & (t_prev >= -1) & (t_prev < t)
    t, t_prev = torch.where(valid, t, 0), torch.where(valid, t_prev, -1)
    return (lambda m, x, z: load_reference().ddim_step(m, t, t_prev, x, schedule, eta, z, *options)), valid


def _ddpm_step_backward(ctx, grad):
    m, t, x, schedule, noise, *options, _generator = _saved_inputs(ctx)
    formula, valid = _ddpm_formula(t, schedule, options)
    g_m, g_x, g_z = _step_gradients(ctx, grad, "ddpm_step", formula, valid, m, x, noise, (0, 2, 4, 3))
    return g_m, None, g_x, None, g_z, None, None, None, None


def _ddim_step_backward(ctx, grad):
    m, t, t_prev, x, schedule, eta, noise, *options, _generator = _saved_inputs(ctx)
    formula, valid = _ddim_formula(t, t_prev, schedule, eta, options)
    g_m, g_x, g_z = _step_gradients(ctx, grad, "ddim_step", formula, valid, m, x, noise, (0, 3, 6, 4))
    return g_m, None, None, g_x, None, None, g_z, None, None, None, None, None, None


def _step_derivatives(name, formula, model_output, sample, schedule, noise):
    """Forward mode's derivatives of a step: the reference's formula, the noise (drawn or given) only as
    zeros, since the step is affine in it: its tangent adds std * tangent, which the formula gives.
    Rows with an invalid timestep are NaN in the kernel's value already."""
    if (torch.autograd.forward_ad.unpack_dual(schedule).tangent is not None
            or (schedule.requires_grad and torch.is_grad_enabled())):
        raise _schedule_not_differentiable(name)
    return formula(model_output, sample, torch.zeros_like(sample) if noise is None else noise)


def _ddpm_step_forward_formula(value, m, t, x, schedule, noise, *rest):
    *options, _generator = rest
    return _step_derivatives("ddpm_step", _ddpm_formula(t, schedule, options)[0], m, x, schedule, noise)


def _ddim_step_forward_formula(value, m, t, t_prev, x, schedule, eta, noise, *rest):
    *options, _generator = rest
    return _step_derivatives("ddim_step", _ddim_formula(t, t_prev, schedule, eta, options)[0], m, x, schedule, noise)


register_autograd(f"{NAMESPACE}::ddpm_step", _ddpm_step_backward, setup_context=_step_setup,
                  forward_formula=_ddpm_step_forward_formula)
register_autograd(f"{NAMESPACE}::ddim_step", _ddim_step_backward, setup_context=_step_setup,
                  forward_formula=_ddim_step_forward_formula)
# They draw only without `noise` (and ddim_step only with eta > 0): given noise vmaps in every randomness mode.
register_drawing_vmap(f"{NAMESPACE}::ddpm_step",
                      draws=lambda model_output, t, sample, schedule, noise=None, *rest, **options: noise is None)
register_drawing_vmap(f"{NAMESPACE}::ddim_step",
                      draws=lambda model_output, t, t_prev, sample, schedule, eta=0.0, noise=None, *rest, **options:
                      noise is None and eta > 0)


def conv1d_gn_mish(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, gn_weight: torch.Tensor,
                   gn_bias: torch.Tensor, num_groups: int, padding: int | None = None,
                   eps: float = 1e-5) -> torch.Tensor:
    """Mish(GroupNorm(Conv1d(x))) = F.mish(F.group_norm(F.conv1d(x, weight, bias, padding=padding),
    num_groups, gn_weight, gn_bias, eps)).

    x: (B, C_in, L); weight: (C_out, C_in, K), stride 1; bias (optional), gn_weight, gn_bias: (C_out,);
    num_groups must divide C_out; padding=None means K // 2 (K must then be odd). dtypes: float32,
    float64, float16 and bfloat16, all accumulated in float32 (float64 for float64). On CUDA, small
    batch x length with K <= 7 runs a direct convolution kernel (exact float32), with GroupNorm + Mish
    in the same launch when a group's channels fit one thread-block cluster (at most 128 channels
    per group); large ones use cuDNN (which follows torch.backends.cudnn.allow_tf32). The rest are
    followed by one fused GroupNorm + Mish kernel. The CPU convolves with PyTorch's convolution in
    x's dtype (float16, and bfloat16 on CPUs without AVX-512, in float32: PyTorch's own is 10-20x
    slower there), then runs one fused GroupNorm + Mish pass. Where PyTorch convolves in a half type
    (cuDNN, the CPU's bfloat16 with AVX-512), the convolution's output is rounded to it before the
    GroupNorm, as in eager PyTorch.
    Differentiable in x, weight, bias, gn_weight and gn_bias: a call that records a gradient keeps the
    convolution's output (B, C_out, L_out) in x's dtype, as eager autograd keeps it, and convolves
    separately from the GroupNorm; the backward runs GroupNorm + Mish's in one kernel, then PyTorch's
    convolution backward (in x's dtype on CUDA, float32 for half types on the CPU). With create_graph=True
    (second derivatives) it recomputes the forward with PyTorch ops and applies the GroupNorm / Mish
    derivatives as a formula in float32 instead (the kernel has no derivatives).
    """
    check_numbers(eps=eps)
    return _ops.conv1d_gn_mish(x, weight, bias, gn_weight, gn_bias, num_groups, padding, eps)


def gn_mish_backward(grad: torch.Tensor, conv_out: torch.Tensor, gn_weight: torch.Tensor, gn_bias: torch.Tensor,
                     num_groups: int, eps: float = 1e-5) -> tuple[torch.Tensor, ...]:
    """The backward of out = F.mish(F.group_norm(conv_out, num_groups, gn_weight, gn_bias, eps)) for the
    gradient `grad` of out: (grad_conv_out, grad_gn_weight, grad_gn_bias, grad_conv_bias), the last
    grad_conv_out summed over batch and length (the gradient of a bias the convolution added), in one kernel
    and one reduction over the batch where torch launches five kernels. conv1d_gn_mish's backward uses it.
    conv_out: (B, C, L); gn_weight, gn_bias: (C,), all of one dtype (float32, float64, float16, bfloat16;
    accumulated in float32, float64 for float64). Its outputs are constants for autograd (create_graph=True
    through conv1d_gn_mish takes a formula)."""
    check_numbers(eps=eps)
    grad_conv_out, sums = _ops.gn_mish_backward(grad, conv_out, gn_weight, gn_bias, num_groups, eps)
    return grad_conv_out, *sums.unbind(0)


# ---------------------------------------------------------------- autograd of conv1d_gn_mish

def _conv_setup(ctx, inputs, output):
    x, weight, bias, gn_weight, gn_bias, num_groups, padding, eps = inputs
    _, conv_out = output  # the autograd twin's: the convolution's output (bias added) for the backward
    ctx.mark_non_differentiable(conv_out)
    ctx.set_materialize_grads(False)  # conv_out is dropped (jk.h's route_autograd): no zeros of its size
    ctx.save_for_backward(x, weight, bias, gn_weight, gn_bias, conv_out)
    ctx.num_groups, ctx.eps = num_groups, eps
    ctx.padding = weight.shape[2] // 2 if padding is None else padding


def _conv_gn_recomputed(xf, wf, bf, gw, gb, groups, pad, eps):
    """The op's forward up to Mish's input h (B, C, L) in PyTorch ops, with the normalized groups zn (B, G, C/G * L)
    and their 1/std (B, G, 1): for the backward and the forward-mode formula. Not F.group_norm: it refuses groups of
    one value (B = 1, num_groups = C, length 1), which the op normalizes to 0 (forward-mode AD raised there)."""
    z = F.conv1d(xf, wf, bf, padding=pad)
    b, c, length = z.shape
    zg = z.reshape(b, groups, c // groups * length)  # not -1: an empty batch has zero elements to infer it from
    rstd = (zg.var(-1, unbiased=False, keepdim=True) + eps).rsqrt()
    zn = (zg - zg.mean(-1, keepdim=True)) * rstd
    return zn.reshape(b, c, length) * gw[:, None] + gb[:, None], zn, rstd


def _conv_backward(ctx, grad, _):
    if grad is None:  # no gradient for the output (gradcheck's undefined-gradient check): grads are not materialized
        return (None,) * 8
    if not torch.is_grad_enabled():  # a plain backward (no create_graph): the kept convolution output
        return _conv_backward_from_conv_out(ctx, grad)
    x, weight, bias, gn_weight, gn_bias, _ = ctx.saved_tensors
    groups, eps, pad = ctx.num_groups, ctx.eps, ctx.padding
    ct = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf, wf, gw, gb, g = x.to(ct), weight.to(ct), gn_weight.to(ct), gn_bias.to(ct), grad.to(ct)
    h, zn, rstd = _conv_gn_recomputed(xf, wf, None if bias is None else bias.to(ct), gw, gb, groups, pad, eps)
    b, c, length = h.shape
    # d/dh [h tanh(softplus(h))] = tanh(sp) + h sech^2(sp) sigmoid(h)
    tsp = torch.tanh(F.softplus(h))
    dh = g * (tsp + h * (1 - tsp * tsp) * torch.sigmoid(h))
    grad_gw = (dh * zn.reshape(b, c, length)).sum((0, 2)) if ctx.needs_input_grad[3] else None
    grad_gb = dh.sum((0, 2)) if ctx.needs_input_grad[4] else None
    grad_x = grad_w = grad_b = None
    if any(ctx.needs_input_grad[:3]):
        dzn = (dh * gw[:, None]).reshape(zn.shape)
        dz = rstd * (dzn - dzn.mean(-1, keepdim=True) - zn * (dzn * zn).mean(-1, keepdim=True))
        mask = [ctx.needs_input_grad[0], ctx.needs_input_grad[1], bias is not None and ctx.needs_input_grad[2]]
        grad_x, grad_w, grad_b = torch.ops.aten.convolution_backward(
            dz.reshape(b, c, length), xf, wf, [c] if bias is not None else None, [1], [pad], [1], False, [0], 1, mask)

    def cast(gr, like):
        return None if gr is None or like is None else gr.to(like.dtype)

    return (cast(grad_x, x), cast(grad_w, weight), cast(grad_b, bias), cast(grad_gw, gn_weight),
            cast(grad_gb, gn_bias), None, None, None)


def _conv_backward_from_conv_out(ctx, grad):
    """GroupNorm + Mish's backward and the convolution bias's gradient in one kernel (gn_mish_backward) from the
    convolution output the forward kept, then the convolution's input and weight gradients (torch's). Session 53's
    backward recomputed the convolution and ran torch's GroupNorm and Mish backward kernels: forward + backward
    took 1.15x eager's device time (H200, B=256 bfloat16), 1.3-1.4x its wall time (the shape sweep). No
    derivatives of its own, so a backward with create_graph=True takes the formula. 16-bit inputs on the CPU
    are computed in float32 (PyTorch's 16-bit CPU convolutions are 10-20x slower)."""
    x, weight, bias, gn_weight, gn_bias, conv_out = ctx.saved_tensors
    widen = x.device.type == "cpu" and x.dtype in (torch.float16, torch.bfloat16)
    # (each .to() costs host time even as a no-op: this backward is host-bound at a diffusion policy's sizes)
    cast, back = (lambda t: t.float(), lambda t: t.to(x.dtype)) if widen else (lambda t: t, lambda t: t)
    grad_z, sums = _ops.gn_mish_backward(cast(grad), cast(conv_out), cast(gn_weight), cast(gn_bias), ctx.num_groups,
                                         ctx.eps)
    need = ctx.needs_input_grad
    grad_x = grad_w = None
    if need[0] or need[1]:
        grad_x, grad_w, _ = torch.ops.aten.convolution_backward(
            grad_z, cast(x), cast(weight), None, [1], [ctx.padding], [1], False, [0], 1, [need[0], need[1], False])
    grad_gw, grad_gb, grad_b = sums.unbind(0)
    return tuple(back(gr) if wanted else None for gr, wanted in (
        (grad_x, need[0]), (grad_w, need[1]), (grad_b, need[2]), (grad_gw, need[3]),
        (grad_gb, need[4]))) + (None,) * 3


def _conv_forward_formula(value, x, weight, bias, gn_weight, gn_bias, num_groups, padding, eps):
    ct = torch.float64 if x.dtype == torch.float64 else torch.float32
    pad = weight.shape[2] // 2 if padding is None else padding
    h, _, _ = _conv_gn_recomputed(x.to(ct), weight.to(ct), None if bias is None else bias.to(ct), gn_weight.to(ct),
                                  gn_bias.to(ct), num_groups, pad, eps)
    return F.mish(h), None  # the twin's conv_out is dropped


register_autograd(f"{NAMESPACE}::conv1d_gn_mish", _conv_backward, setup_context=_conv_setup,
                  forward_formula=_conv_forward_formula)
