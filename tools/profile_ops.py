"""Where the GPU time of benchmark cases goes: each kernel's device time per call, for ours, eager
and torch.compile, from torch.profiler (L2 flushed before every call, as do_bench does).

    python tools/profile_ops.py "conv1d_gn_mish B=1 C=256" "kron" ...   (a case matches when every
        word of a pattern is in "family op shape dtype")
    ncu ... python tools/profile_ops.py --ours-only --calls 1 PATTERN   (one call of ours after warm-up,
        for Nsight Compute: name our kernels with ncu's -k)
"""
import argparse
import importlib
import sys
from collections import defaultdict
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import loader  # noqa: E402


def matching_cases(patterns: list[str]):
    for family in loader.families():
        try:
            module = importlib.import_module(f"benchmarks.cases_{family}")
        except ModuleNotFoundError:
            continue
        for case in module.cases("cuda"):
            label = f"{case.family} {case.op} {case.shape} {case.dtype}"
            if any(all(word in label for word in p.split()) for p in patterns):
                yield label, case


def kernel_times(fn, calls: int) -> list[tuple[str, float, float]]:
    """(kernel, µs per call, launches per call), slowest first."""
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush.zero_()
            fn()
        torch.cuda.synchronize()
    totals, counts = defaultdict(float), defaultdict(int)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA and "zero_" not in event.name \
                and not (event.name.startswith("void at::native::vectorized_elementwise_kernel") and "FillFunctor" in event.name):
            totals[event.name] += event.device_time
            counts[event.name] += 1
    return sorted(((name, totals[name] / calls, counts[name] / calls) for name in totals), key=lambda t: -t[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("patterns", nargs="+")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--ours-only", action="store_true")
    args = parser.parse_args()
    for label, case in matching_cases(args.patterns):
        print(f"== {label}", flush=True)
        runs = [("ours", lambda: case.ours(*case.args))]
        if not args.ours_only and case.reference is not None:
            runs.append(("eager", lambda: case.reference(*case.args)))
            if case.compile:
                torch._dynamo.reset()
                compiled = torch.compile(case.reference, dynamic=False)
                runs.append(("compile", lambda: compiled(*case.args)))
        for who, fn in runs:
            rows = kernel_times(fn, args.calls)
            print(f"  {who}: {sum(t for _, t, _ in rows):.1f} µs of kernels per call", flush=True)
            for name, us, per_call in rows[:6]:
                print(f"    {us:8.1f} µs  x{per_call:.0f}  {name[:150]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
