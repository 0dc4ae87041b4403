"""Build (first time) or load (afterwards) every kernel family, run every op on the GPU if
there is one (else on the CPU), check it against its plain-PyTorch reference and time it.

    python examples/quickstart.py [--device cpu|cuda] [--full]

Prints: op, device, dtype, max error against the reference, whether that error is within the
dtype's tolerance, our time, eager time, speedup. Exits with status 1 if a family fails to load or an
op's result is off. The ops and inputs are the benchmark cases (benchmarks/cases_<family>.py) at small
sizes; --full uses the benchmark sizes.
"""
import argparse
import importlib
import math
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import loader  # noqa: E402


# Largest error allowed, relative to the reference's largest magnitude: 16-bit results are rounded to 8 or
# 11 bits, and float32 references on the GPU may run their convolutions and matmuls in TF32 (10 bits).
# A wrong kernel (a wrong index, sign or formula) is off by the size of the values themselves.
TOLERANCE = {"float64": 1e-9, "float32": 5e-3, "float16": 2e-2, "bfloat16": 3e-2}


def errors(ours, ref) -> tuple[float, float] | None:
    """(largest absolute difference, that over the largest |reference| value) over the (nested) tensor
    outputs; None if neither holds a tensor (an optimizer step's None: nothing to compare). NaN if any
    value is NaN; inf if the outputs differ in shape or structure, so the row fails (until session 44
    such a result was "not comparable" and passed: a kernel returning half its output exited 0)."""
    mismatch = (math.inf, math.inf)
    if isinstance(ours, torch.Tensor) and isinstance(ref, torch.Tensor):
        if ours.shape != ref.shape:
            return mismatch
        if not ours.numel():
            return 0.0, 0.0
        ours, ref = ours.double(), ref.double()
        absolute = (ours - ref).abs().max().item()
        return absolute, absolute / max(ref.abs().max().item(), 1e-30)
    if isinstance(ours, (tuple, list)) and isinstance(ref, (tuple, list)):
        if len(ours) != len(ref):
            return mismatch
        parts = [part for part in (errors(a, b) for a, b in zip(ours, ref)) if part is not None]
        if not parts:
            return None
        # The largest of each, NaN if any is (max() would drop a NaN that is not first).
        return tuple(float("nan") if any(v != v for v in values) else max(values) for values in zip(*parts))
    if ours is None and ref is None:
        return None
    return mismatch


def row_name(family: str, case) -> str:
    return f"{family}.{case.op} {case.shape}"


def time_ms(fn, device: str, repeats: int = 15) -> float:
    """Milliseconds per call. CPU: the median of single calls, so one slow call (a page fault, a late
    thread) does not set the figure (means swung 2-3x between runs on a 2-core machine). CUDA: the
    mean over a loop between two syncs (a sync per call would time the sync)."""
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / repeats * 1e3
    calls = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        calls.append(time.perf_counter() - start)
    return statistics.median(calls) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--full", action="store_true", help="benchmark sizes instead of small ones")
    args = parser.parse_args()
    loader.prebuild()  # a first run: the families that need it compile side by side
    failures = 0
    ready = []  # (family, its cases): every family is loaded first, so the table's op column fits every name
    for family in loader.families():
        try:
            start = time.perf_counter()
            loader.load(family)
            print(f"-- {family}: ready in {time.perf_counter() - start:.2f} s")
            ready.append((family, importlib.import_module(f"benchmarks.cases_{family}").cases(args.device,
                                                                                            small=not args.full)))
        except Exception as exc:  # one broken family does not stop the others
            failures += 1
            print(f"-- {family}: FAILED: {exc}")
    width = max((len(row_name(family, case)) for family, cases in ready for case in cases), default=2)
    print(f"{'op':{width}s} {'device':6s} {'dtype':9s} {'max err':>9s} {'check':5s} {'ours ms':>9s} {'eager ms':>9s} "
          f"{'speedup':>8s}")
    for family, cases in ready:
        for case in cases:
            torch.manual_seed(0)
            ours = case.ours(*case.args)
            error, check = "random", "–"  # draws: compared statistically by the tests, not here
            if case.reference is not None and not case.random:
                torch.manual_seed(0)
                found = errors(ours, case.reference(*case.args))
                if found is None:
                    error = "–"
                else:
                    error = f"{found[0]:.1e}"
                    check = "ok" if found[1] <= TOLERANCE[case.dtype] else "FAIL"  # NaN fails
                    failures += check == "FAIL"
            ours_ms = time_ms(lambda: case.ours(*case.args), args.device)
            eager_ms = time_ms(lambda: case.reference(*case.args), args.device) if case.reference else None
            speedup = f"{eager_ms / ours_ms:7.2f}x" if eager_ms else "–"
            print(f"{row_name(family, case):{width}s} {args.device:6s} {case.dtype:9s} {error:>9s} {check:5s} {ours_ms:9.3f} "
                  f"{eager_ms if eager_ms is not None else float('nan'):9.3f} {speedup:>8s}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
