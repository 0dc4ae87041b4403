"""Session 51: test_determinism's graph test failed once for normal_bf16 ("replays ignore the seed": the first
replay after manual_seed(3) gave other numbers than the first replay after the next manual_seed(3)). Is it our
op or torch's replay? The test's sequence, many times per op, for ours and for torch.randn, with and without a
synchronize after each replay, and (busy=True, call 4) with the GPU kept ~10 ms behind the host by
torch.cuda._sleep before each replay, as 12 test workers sharing the GPU may keep it; prints the mismatch counts."""
import sys

import torch

sys.path.insert(0, "tests")
from test_determinism import _flat, _random_ops  # noqa: E402

TRIALS = int(sys.argv[sys.argv.index("--trials") + 1]) if "--trials" in sys.argv else 40


def sequence(call, sync, busy=False):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call()

    def replay():
        if busy:
            torch.cuda._sleep(20_000_000)  # ~10 ms of spinning queued ahead of the replay
        graph.replay()
        if sync:
            torch.cuda.synchronize()
        return _flat(out).clone()

    torch.manual_seed(3)
    first, second = replay(), replay()
    torch.manual_seed(3)
    again_first, again_second = replay(), replay()
    graph.reset()
    return (not torch.equal(first, again_first)) or (not torch.equal(second, again_second))


ops = _random_ops("cuda")
ops["torch.randn"] = lambda: torch.randn(100, 8, device="cuda")
ops["torch.randn_bf16"] = lambda: torch.randn(100, 8, device="cuda", dtype=torch.bfloat16)
BUSY = "--busy" in sys.argv
for name in ["normal", "normal_bf16", "torch.randn", "torch.randn_bf16", "ddpm_step", "langevin_step"]:
    for sync in (False, True):
        bad = sum(sequence(ops[name], sync, BUSY) for _ in range(TRIALS))
        print(f"{name:18s} sync={sync!s:5s} busy={BUSY}: {bad}/{TRIALS} sequences where a replay after manual_seed differed",
              flush=True)
