"""Fused activations: relu_add = relu(x) + y + bias, with autograd.

dtypes: float32, float64, float16 and bfloat16 (half types accumulate in float32).
Inputs may have any strides; the output is contiguous. Shapes for fake tensors
(torch.compile, opcheck) come from the op's Meta kernel in fused.cpp.
"""
from collections.abc import Callable

import torch

NAMESPACE: str  # the build's op namespace, set by loader.py before this file runs
register_autograd: Callable  # loader.register_autograd, set beside it: torch.library.register_autograd's
                             # signature at a fraction of its load time
register_vmap: Callable      # loader.register_vmap: torch.library.register_vmap's, quicker to load
_ops = getattr(torch.ops, NAMESPACE)

__all__ = ["relu_add"]


def relu_add(x: torch.Tensor, y: torch.Tensor, bias: float = 0.0) -> torch.Tensor:
    """relu(x) + y + bias in one pass over memory.

    x, y: tensors of the same shape, dtype and device (CPU or CUDA).
    Differentiable in x and y: grad_x = grad * (x > 0), grad_y = grad.
    """
    return _ops.relu_add(x, y, bias)


def _relu_add_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _relu_add_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad.masked_fill(x <= 0, 0), grad, None


register_autograd(f"{NAMESPACE}::relu_add", _relu_add_backward, setup_context=_relu_add_setup,
                  forward_formula=lambda value, x, y, bias: torch.relu(x) + y)  # forward mode's derivatives


def _relu_add_vmap(info, in_dims, x, y, bias=0.0):  # the dispatcher drops a default bias
    """torch.vmap of relu_add, an elementwise op: one call on the batched tensors (an unbatched one
    expanded to the vmapped size), not torch's fallback of one call per member (session 41)."""
    x, y = (t.movedim(d, 0) if d is not None else t.expand(info.batch_size, *t.shape)
            for t, d in zip((x, y), in_dims))
    return _ops.relu_add(x, y, bias), 0


for _op in ("relu_add", "relu_add_autograd"):  # the op and its autograd twin (loader.register_autograd)
    register_vmap(f"{NAMESPACE}::{_op}", _relu_add_vmap)
