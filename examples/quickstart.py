"""Build (first time) or load (afterwards) every kernel family, run every op on the GPU if
there is one (else on the CPU), check it against its plain-PyTorch reference and time it.

    python examples/quickstart.py [--device cpu|cuda] [--full]

Prints: op, device, dtype, max error against the reference, our time, eager time, speedup.
The ops and inputs are the benchmark cases (benchmarks/cases_<family>.py) at small sizes;
--full uses the benchmark sizes.
"""
import argparse
import importlib
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import loader  # noqa: E402


def max_error(ours, ref) -> float | None:
    """Largest absolute difference over the (nested) tensor outputs, or None if not comparable."""
    if isinstance(ours, torch.Tensor) and isinstance(ref, torch.Tensor):
        if ours.shape != ref.shape:
            return None
        return (ours.double() - ref.double()).abs().max().item() if ours.numel() else 0.0
    if isinstance(ours, (tuple, list)) and isinstance(ref, (tuple, list)) and len(ours) == len(ref):
        errors = [max_error(a, b) for a, b in zip(ours, ref)]
        return None if any(e is None for e in errors) else max(errors, default=0.0)
    return None


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--full", action="store_true", help="benchmark sizes instead of small ones")
    args = parser.parse_args()
    print(f"{'op':34s} {'device':6s} {'dtype':9s} {'max err':>9s} {'ours ms':>9s} {'eager ms':>9s} {'speedup':>8s}")
    failures = 0
    loader.prebuild()  # a first run: the families that need it compile side by side
    for family in loader.families():
        try:
            start = time.perf_counter()
            loader.load(family)
            print(f"-- {family}: ready in {time.perf_counter() - start:.2f} s")
            cases = importlib.import_module(f"benchmarks.cases_{family}").cases(args.device, small=not args.full)
        except Exception as exc:  # one broken family does not stop the others
            failures += 1
            print(f"-- {family}: FAILED: {exc}")
            continue
        for case in cases:
            torch.manual_seed(0)
            ours = case.ours(*case.args)
            error = "random"
            if case.reference is not None and not case.random:
                torch.manual_seed(0)
                value = max_error(ours, case.reference(*case.args))
                error = "–" if value is None else f"{value:.1e}"
            ours_ms = time_ms(lambda: case.ours(*case.args), args.device)
            eager_ms = time_ms(lambda: case.reference(*case.args), args.device) if case.reference else None
            speedup = f"{eager_ms / ours_ms:7.2f}x" if eager_ms else "–"
            name = f"{family}.{case.op} {case.shape}"
            print(f"{name[:34]:34s} {args.device:6s} {case.dtype:9s} {error:>9s} {ours_ms:9.3f} "
                  f"{eager_ms if eager_ms is not None else float('nan'):9.3f} {speedup:>8s}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
