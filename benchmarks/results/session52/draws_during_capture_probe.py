"""Session 52: does another thread's draw from the default CUDA generator fail while cem_minimize(cuda_graph=True)
captures its refit? torch 2.11's CUDAGraph registers the default generator with every capture and marks its state
as capturing until capture_end, and a draw outside a capture checks that mark. Thread B draws torch.randn in a
loop while the main thread runs cem_minimize(cuda_graph=True) 50 times; a control runs with cuda_graph=False.
Then the same with B drawing from a torch.Generator of its own."""
import threading

import torch

import loader

fam = loader.load("sampling")


def trial(cuda_graph: bool, own_generator: bool) -> str:
    stop, errors, draws = threading.Event(), [], [0]
    generator = torch.Generator(device="cuda").manual_seed(1) if own_generator else None

    def drawer():
        with torch.cuda.stream(torch.cuda.Stream()):
            while not stop.is_set():
                try:
                    torch.randn(1 << 10, device="cuda", generator=generator)
                    draws[0] += 1
                except RuntimeError as error:
                    errors.append(str(error).splitlines()[0])

    thread = threading.Thread(target=drawer)
    thread.start()
    try:
        for _ in range(50):
            fam.cem_minimize(lambda x: (x * x).sum(-1), torch.zeros(8, device="cuda"), 1.0, 4096, 64, 6,
                             cuda_graph=cuda_graph)
        torch.cuda.synchronize()
    finally:
        stop.set()
        thread.join()
    kinds = sorted(set(errors))
    return f"cuda_graph={cuda_graph} own_generator={own_generator}: {draws[0]} draws, {len(errors)} failed {kinds[:2]}"


for cuda_graph, own in [(False, False), (True, False), (True, True)]:
    print(trial(cuda_graph, own), flush=True)
