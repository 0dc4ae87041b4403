"""Family `fused` in plain PyTorch: the spec, the test oracle and the benchmark baseline."""
import torch


def relu_add(x: torch.Tensor, y: torch.Tensor, bias: float = 0.0) -> torch.Tensor:
    return torch.relu(x) + y + bias
