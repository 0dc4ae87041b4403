"""Benchmark cases for the `fused` family."""
import torch

import loader
from benchmarks.common import Case


def cases(device: str, small: bool = False) -> list[Case]:
    fused = loader.load("fused")
    n = (1 << 16) if small else (1 << 26) if device == "cuda" else (1 << 22)
    out = []
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(n, device=device, dtype=dtype)
        y = torch.randn(n, device=device, dtype=dtype)
        out.append(Case("fused", "relu_add", f"2^{n.bit_length() - 1}", str(dtype).removeprefix("torch."),
                        fused.relu_add, fused.reference.relu_add, (x, y, 0.5), bytes=3 * n * x.element_size()))
    return out
