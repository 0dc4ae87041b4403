"""What a family's benchmark cases look like. benchmarks/run.py times every Case of every
`benchmarks/cases_<family>.py`, a module with `cases(device, small=False) -> list[Case]`
(small=True: sizes that run in moments on a CPU, used by examples/quickstart.py)."""
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Case:
    family: str
    op: str
    shape: str                # human-readable size, e.g. "B=2^21 D=16"
    dtype: str                # "float32", "bfloat16", ...
    ours: Callable            # called as ours(*args)
    reference: Callable | None  # the plain-PyTorch baseline, called as reference(*args); also torch.compiled
    args: tuple = ()
    bytes: int = 0            # fewest bytes the op must move (each input read once, each output written once)
    flops: int = 0            # arithmetic the op must do (0 when memory-bound)
    compile: bool = True      # also time torch.compile(reference)
    random: bool = False      # draws random numbers: outputs can't be compared with the reference's
    launch_bound: bool = False  # also time calls back to back in a loop (host time per call included)
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
