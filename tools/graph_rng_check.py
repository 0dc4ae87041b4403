"""Does a CUDA graph replayed after torch.manual_seed reproduce its numbers? Checks torch's own
randn beside our random ops, many rounds, so a failure can be pinned on torch or on us.
Run several copies at once to load the machine:  python tools/graph_rng_check.py --rounds 300"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import loader  # noqa: E402


def captured(call):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call()
    return graph, out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--sync", action="store_true", help="synchronize before each manual_seed")
    args = parser.parse_args()
    x = torch.randn(64, 8, device="cuda")
    grad = torch.randn(64, 8, device="cuda")
    inplace = x.clone()
    mean, std = torch.zeros(8, device="cuda"), torch.ones(8, device="cuda")
    ops = {
        "torch.randn": lambda: torch.randn(64, 8, device="cuda"),
        "torch.randn_like+add": lambda: x + torch.randn_like(x),
        "langevin_step": lambda: loader.ebm.langevin_step(x, grad, 0.01),
        "langevin_step_": lambda: loader.ebm.langevin_step_(inplace.copy_(x), grad, 0.01),
        "normal_bf16": lambda: loader.sampling.normal(mean, std, 100, dtype=torch.bfloat16),
    }
    for name, call in ops.items():
        graph, out = captured(call)
        bad = 0
        for _ in range(args.rounds):
            if args.sync:
                torch.cuda.synchronize()
            torch.manual_seed(3)
            graph.replay()
            first = out.float().clone()
            if args.sync:
                torch.cuda.synchronize()
            torch.manual_seed(3)
            graph.replay()
            bad += not torch.equal(first, out.float())
        print(f"{name:22s} sync={args.sync}: {bad} of {args.rounds} replays after manual_seed differed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
