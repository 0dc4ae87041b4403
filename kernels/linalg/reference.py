"""Family `linalg` in plain PyTorch: the spec, the test oracle and the benchmark baselines."""
import torch


def matrix_inverse_root(A: torch.Tensor, p: int = 4, eps: float = 1e-6) -> torch.Tensor:
    """(A + eps I)^(-1/p) through eigh in float64 of the symmetrized input, eigenvalues clamped at 0."""
    A64 = A.double()
    A64 = (A64 + A64.mT) / 2
    L, V = torch.linalg.eigh(A64)
    X = (V * (L.clamp_min(0) + eps).pow(-1.0 / p).unsqueeze(-2)) @ V.mT
    return X.to(A.dtype)


def matrix_inverse_root_eigh(A: torch.Tensor, p: int = 4, eps: float = 1e-6) -> torch.Tensor:
    """The eigh route in A's own dtype (what Shampoo implementations do): the speed baseline."""
    L, V = torch.linalg.eigh(A)
    return (V * (L.clamp_min(0) + eps).pow(-1.0 / p).unsqueeze(-2)) @ V.mT


def kron(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Per-batch Kronecker product of (..., m, n) and (..., p, q): (..., m*p, n*q)."""
    m, n = A.shape[-2:]
    p, q = B.shape[-2:]
    return torch.einsum("...ij,...kl->...ikjl", A, B).reshape(*A.shape[:-2], m * p, n * q)


def per_sample_grad_linear(x: torch.Tensor, grad_out: torch.Tensor, with_bias: bool = True):
    """Per-sample gradients of y = x W^T + b: (grad_out_b x_b^T, grad_out_b) for each row b."""
    grad_w = torch.einsum("bo,bi->boi", grad_out, x)
    return grad_w, (grad_out.clone() if with_bias else None)


def per_sample_grads(model, loss_fn, inputs, targets) -> dict:
    """Per-sample gradients by a loop over samples, one backward each: the slow, obvious oracle."""
    params = {name: p for name, p in model.named_parameters() if p.requires_grad}
    grads = {name: [] for name in params}
    for i in range(inputs.shape[0]):
        loss = loss_fn(model(inputs[i:i + 1]), targets[i:i + 1])
        per = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
        for (name, p), g in zip(params.items(), per):
            grads[name].append(torch.zeros_like(p) if g is None else g)
    return {name: torch.stack(g) for name, g in grads.items()}
