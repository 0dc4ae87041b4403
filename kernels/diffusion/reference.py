"""Family `diffusion` in plain PyTorch: the spec, the test oracle and the eager baseline.

The step formulas follow Hugging Face diffusers' DDPMScheduler.step (variance_type="fixed_small",
no thresholding, prev_t = t - 1) and DDIMScheduler.step, with per-timestep constants computed in
float64 from the schedule's alphas_cumprod column and the elementwise math in float32 (float64 for
float64 inputs).
"""
import math

import torch
import torch.nn.functional as F

SCHEDULE_COLUMNS = (
    "beta", "alphas_cumprod", "sqrt_alphas_cumprod", "sqrt_one_minus_alphas_cumprod", "rsqrt_alphas_cumprod",
    "posterior_coef_x0", "posterior_coef_xt", "posterior_std",
)


def ddpm_schedule(num_train_timesteps=1000, beta_schedule="linear", beta_start=1e-4, beta_end=0.02, device=None):
    T = num_train_timesteps
    f64 = torch.float64
    if beta_schedule == "linear":
        betas = torch.linspace(beta_start, beta_end, T, dtype=f64)
    elif beta_schedule == "scaled_linear":
        betas = torch.linspace(beta_start ** 0.5, beta_end ** 0.5, T, dtype=f64) ** 2
    elif beta_schedule == "squaredcos_cap_v2":
        def alpha_bar(s):
            return math.cos((s + 0.008) / 1.008 * math.pi / 2) ** 2
        betas = torch.tensor([min(1 - alpha_bar((i + 1) / T) / alpha_bar(i / T), 0.999) for i in range(T)], dtype=f64)
    else:
        raise ValueError(f"beta_schedule must be linear, scaled_linear or squaredcos_cap_v2, got {beta_schedule!r}")
    ac = torch.cumprod(1 - betas, 0)
    prev = torch.cat([torch.ones(1, dtype=f64), ac[:-1]])
    cur_beta = 1 - ac / prev
    std = ((1 - prev) / (1 - ac) * cur_beta).clamp(min=1e-20).sqrt()
    std[0] = 0.0
    cols = [betas, ac, ac.sqrt(), (1 - ac).sqrt(), ac.rsqrt(), prev.sqrt() * cur_beta / (1 - ac),
            (ac / prev).sqrt() * (1 - prev) / (1 - ac), std]
    return torch.stack(cols, 1).to(device)


def _compute_dtype(sample):
    return torch.float64 if sample.dtype == torch.float64 else torch.float32


def _per_row(v, sample):
    """A float64 per-timestep value (scalar or (B,)) as a broadcastable tensor in the compute dtype."""
    v = v.to(_compute_dtype(sample))
    return v.view(-1, *([1] * (sample.dim() - 1))) if v.dim() == 1 else v


def _timesteps(t, schedule):
    return torch.as_tensor(t, device=schedule.device).long()


def _pred_x0_eps(m, x, sa, s1m, prediction_type):
    if prediction_type == "epsilon":
        return (x - s1m * m) / sa, m
    if prediction_type == "sample":
        return m, (x - sa * m) / s1m
    if prediction_type == "v_prediction":
        return sa * x - s1m * m, sa * m + s1m * x
    raise ValueError(f"prediction_type must be epsilon, v_prediction or sample, got {prediction_type!r}")


def ddpm_step(model_output, t, sample, schedule, noise=None, prediction_type="epsilon", clip_sample=True,
              clip_sample_range=1.0):
    t = _timesteps(t, schedule)
    ac = schedule[:, 1]
    alpha_prod_t = ac.take(t)  # take, not ac[t]: a 0-d index tensor is read on the host (.item())
    alpha_prod_t_prev = torch.where(t > 0, ac.take((t - 1).clamp(min=0)), torch.ones_like(alpha_prod_t))
    beta_prod_t, beta_prod_t_prev = 1 - alpha_prod_t, 1 - alpha_prod_t_prev
    current_alpha_t = alpha_prod_t / alpha_prod_t_prev
    current_beta_t = 1 - current_alpha_t
    variance = (beta_prod_t_prev / beta_prod_t * current_beta_t).clamp(min=1e-20)
    std = torch.where(t > 0, variance.sqrt(), torch.zeros_like(variance))

    ct = _compute_dtype(sample)
    m, x = model_output.to(ct), sample.to(ct)
    sa, s1m = _per_row(alpha_prod_t.sqrt(), sample), _per_row(beta_prod_t.sqrt(), sample)
    x0, _ = _pred_x0_eps(m, x, sa, s1m, prediction_type)
    if clip_sample:
        x0 = x0.clamp(-clip_sample_range, clip_sample_range)
    c0 = _per_row(alpha_prod_t_prev.sqrt() * current_beta_t / beta_prod_t, sample)
    c1 = _per_row(current_alpha_t.sqrt() * beta_prod_t_prev / beta_prod_t, sample)
    out = c0 * x0 + c1 * x
    if noise is None:
        noise = torch.randn_like(sample)
    out = out + _per_row(std, sample) * noise.to(ct)
    return out.to(sample.dtype)


def ddim_step(model_output, t, t_prev, sample, schedule, eta=0.0, noise=None, prediction_type="epsilon",
              clip_sample=True, clip_sample_range=1.0, set_alpha_to_one=True, use_clipped_model_output=False):
    t, t_prev = _timesteps(t, schedule), _timesteps(t_prev, schedule)
    ac = schedule[:, 1]
    final = torch.ones((), dtype=ac.dtype, device=ac.device) if set_alpha_to_one else ac[0]
    alpha_prod_t = ac.take(t)
    alpha_prod_t_prev = torch.where(t_prev >= 0, ac.take(t_prev.clamp(min=0)), final)
    beta_prod_t, beta_prod_t_prev = 1 - alpha_prod_t, 1 - alpha_prod_t_prev
    variance = beta_prod_t_prev / beta_prod_t * (1 - alpha_prod_t / alpha_prod_t_prev)
    std_dev_t = eta * variance.sqrt()

    ct = _compute_dtype(sample)
    m, x = model_output.to(ct), sample.to(ct)
    sa, s1m = _per_row(alpha_prod_t.sqrt(), sample), _per_row(beta_prod_t.sqrt(), sample)
    x0, eps = _pred_x0_eps(m, x, sa, s1m, prediction_type)
    if clip_sample:
        x0 = x0.clamp(-clip_sample_range, clip_sample_range)
    if use_clipped_model_output:
        eps = (x - sa * x0) / s1m
    direction = _per_row((1 - alpha_prod_t_prev - std_dev_t ** 2).sqrt(), sample) * eps
    out = _per_row(alpha_prod_t_prev.sqrt(), sample) * x0 + direction
    if eta > 0:
        if noise is None:
            noise = torch.randn_like(sample)
        out = out + _per_row(std_dev_t, sample) * noise.to(ct)
    return out.to(sample.dtype)


def conv1d_gn_mish(x, weight, bias, gn_weight, gn_bias, num_groups, padding=None, eps=1e-5):
    if padding is None:
        padding = weight.shape[-1] // 2
    return F.mish(F.group_norm(F.conv1d(x, weight, bias, padding=padding), num_groups, gn_weight, gn_bias, eps))


def gn_mish_backward(grad, conv_out, gn_weight, gn_bias, num_groups, eps=1e-5):
    with torch.enable_grad():
        z, w, b = (t.detach().requires_grad_() for t in (conv_out, gn_weight, gn_bias))
        out = F.mish(F.group_norm(z, num_groups, w, b, eps))
        grad_z, grad_w, grad_b = torch.autograd.grad(out, (z, w, b), grad)
        return grad_z, grad_w, grad_b, grad_z.sum((0, 2))
