"""Fused activations: relu_add = relu(x) + y + bias, with autograd.

dtypes: float32, float64, float16 and bfloat16 (half types accumulate in float32).
Inputs may have any strides. The output has x's layout when x is dense (transposed, channels-last,
...), as torch's relu(x) + y, and is contiguous otherwise. Shapes for fake tensors
(torch.compile, opcheck) come from the op's Meta kernel in fused.cpp.
"""
from collections.abc import Callable

import torch

NAMESPACE: str  # the build's op namespace, set by loader.py before this file runs
register_autograd: Callable  # loader.register_autograd, set beside it: torch.library.register_autograd's
                             # signature at a fraction of its load time
register_batch_dim_vmap: Callable  # loader.register_batch_dim_vmap: the vmapped dimension as a batch dimension
_ops = getattr(torch.ops, NAMESPACE)

__all__ = ["relu_add"]


def relu_add(x: torch.Tensor, y: torch.Tensor, bias: float | torch.Tensor = 0.0) -> torch.Tensor:
    """relu(x) + y + bias in one pass over memory.

    x, y: tensors of the same shape, dtype and device (CPU or CUDA).
    bias: a number, or a real 0-d tensor (then relu(x) + y + bias as two ops, as the reference computes it:
    the same in eager and under torch.compile, and differentiable in bias; any other tensor raises).
    Differentiable in x and y: grad_x = grad * (x > 0), grad_y = grad.
    """
    if torch.overrides.is_tensor_like(bias):  # also torch.fx's Proxy, whose shape is unknown: the sum is recorded
        # The schema's float bias read a 0-d tensor as a number eagerly only: torch.compile's fake tensor
        # failed the schema, a (1,) tensor passed silently and a bias that requires grad lost its gradient.
        if isinstance(bias, torch.Tensor) and (bias.dim() != 0 or bias.is_complex()):
            raise ValueError(f"bias must be a number or a real 0-d tensor, got a {bias.dtype} tensor of shape "
                             f"{tuple(bias.shape)}")
        return _ops.relu_add(x, y, 0.0) + bias
    return _ops.relu_add(x, y, bias)


def _relu_add_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _relu_add_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    # one kernel, relu's own backward (masked_fill(x <= 0, 0) took two: forward + backward of a 2^24 relu_add was
    # 1.3-1.7x eager's, session 53's sweep)
    return torch.ops.aten.threshold_backward(grad, x, 0), grad, None


register_autograd(f"{NAMESPACE}::relu_add", _relu_add_backward, setup_context=_relu_add_setup,
                  forward_formula=lambda value, x, y, bias: torch.relu(x) + y)  # forward mode's derivatives

register_batch_dim_vmap(f"{NAMESPACE}::relu_add")  # vmap: one call on the batched tensors, not one per sample
