"""Family `sampling` in plain PyTorch: the spec, the test oracle and the benchmark baseline."""
import torch


def normal(mean: torch.Tensor, std: torch.Tensor, n: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """(n, d) samples, element [i, j] ~ N(mean[j], std[j]^2), each an independent draw."""
    z = torch.randn(n, mean.shape[0], dtype=mean.dtype, device=mean.device)
    return (mean + std * z).to(dtype or mean.dtype)


def cem_update(samples, scores, n_elite, mean, std, smoothing=0.0, min_std=0.0, maximize=False):
    """The elite are the n_elite lowest scores (highest when maximize); NaN ranks last either way and
    ties go to the lower index (a stable sort). Their mean and population std (divide by n_elite) are
    blended as smoothing * old + (1 - smoothing) * fitted, and the std is floored at min_std."""
    key = -scores if maximize else scores
    elite_idx = torch.sort(key, stable=True).indices[:n_elite]
    acc = torch.float64 if samples.dtype == torch.float64 else torch.float32
    elite = samples[elite_idx].to(acc)
    fit_mean = elite.mean(0)
    fit_std = elite.std(0, correction=0)
    new_mean = smoothing * mean.to(acc) + (1 - smoothing) * fit_mean
    new_std = (smoothing * std.to(acc) + (1 - smoothing) * fit_std).clamp_min(min_std)
    return new_mean.to(mean.dtype), new_std.to(mean.dtype)


def cem_minimize(fn, mean, std, n_samples, n_elite, n_iters, smoothing=0.0, min_std=0.0, maximize=False):
    """The plain-PyTorch CEM loop: returns (mean, std, best value per iteration)."""
    best = []
    for _ in range(n_iters):
        samples = normal(mean, std, n_samples)
        scores = fn(samples)
        best.append(scores.max() if maximize else scores.min())
        mean, std = cem_update(samples, scores, n_elite, mean, std, smoothing, min_std, maximize)
    return mean, std, torch.stack(best)


# Test objectives (batched: (n, d) -> (n,)), minimum 0 at x = 0 (Rastrigin) and x = 1 (Rosenbrock).
def rastrigin(x: torch.Tensor) -> torch.Tensor:
    return 10.0 * x.shape[-1] + (x * x - 10.0 * torch.cos(2 * torch.pi * x)).sum(-1)


def rosenbrock(x: torch.Tensor) -> torch.Tensor:
    return (100.0 * (x[..., 1:] - x[..., :-1] ** 2) ** 2 + (1 - x[..., :-1]) ** 2).sum(-1)
