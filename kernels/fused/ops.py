"""Fused activations: relu_add = relu(x) + y + bias, with autograd.

dtypes: float32, float64, float16 and bfloat16 (half types accumulate in float32).
Inputs may have any strides; the output is contiguous. Shapes for fake tensors
(torch.compile, opcheck) come from the op's Meta kernel in fused.cpp, and the autograd
formula is registered there too (in C++ it adds nothing to a warm load; see fused.cpp).
"""
import torch

NAMESPACE: str  # the build's op namespace, set by loader.py before this file runs
_ops = getattr(torch.ops, NAMESPACE)

__all__ = ["relu_add"]


def relu_add(x: torch.Tensor, y: torch.Tensor, bias: float = 0.0) -> torch.Tensor:
    """relu(x) + y + bias in one pass over memory.

    x, y: tensors of the same shape, dtype and device (CPU or CUDA).
    Differentiable in x and y: grad_x = grad * (x > 0), grad_y = grad.
    """
    return _ops.relu_add(x, y, bias)

