"""Every random op reproduces exactly under torch.manual_seed on the same device, draws fresh
numbers on the next call, and does the same inside a captured CUDA graph replayed twice."""
import gc

import pytest
import torch
from conftest import DEVICES, needs_cuda, needs_graphs

import loader


def _random_ops(device):
    """name -> a call of one random op on fixed inputs (the inputs are made once, outside)."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(64, 8, generator=g).to(device)
    grad = torch.randn(64, 8, generator=g).to(device)
    mean, std = torch.randn(8, generator=g).to(device), torch.rand(8, generator=g).to(device) + 0.1
    sample = torch.randn(4, 3, 16, generator=g).to(device)
    model_output = torch.randn(4, 3, 16, generator=g).to(device)
    schedule = loader.diffusion.ddpm_schedule(50, device=device)
    t = torch.tensor([49, 10, 3, 1], device=device)
    t_prev = torch.tensor([40, 5, 0, -1], device=device)
    ebm, sampling, diffusion = loader.ebm, loader.sampling, loader.diffusion
    inplace = x.clone()
    return {
        "langevin_step": lambda: ebm.langevin_step(x, grad, 0.01),
        "langevin_step_": lambda: ebm.langevin_step_(inplace.copy_(x), grad, 0.01),
        "langevin_chain": lambda: ebm.langevin_chain(x, "double_well", 5, 0.01),
        "hmc_chain": lambda: ebm.hmc_chain(x, "harmonic", 3, 0.1, n_leapfrog=2),
        "normal": lambda: sampling.normal(mean, std, 100),
        "normal_bf16": lambda: sampling.normal(mean, std, 100, dtype=torch.bfloat16),
        "ddpm_step": lambda: diffusion.ddpm_step(model_output, t, sample, schedule),
        "ddim_step": lambda: diffusion.ddim_step(model_output, t, t_prev, sample, schedule, eta=1.0),
    }


def _flat(result):
    parts = result if isinstance(result, (tuple, list)) else (result,)
    return torch.cat([p.float().flatten() for p in parts])


OPS = ["langevin_step", "langevin_step_", "langevin_chain", "hmc_chain", "normal", "normal_bf16", "ddpm_step",
       "ddim_step"]


@pytest.mark.parametrize("op", OPS)
def test_seed_reproduces_and_next_call_is_fresh(device, op):
    call = _random_ops(device)[op]
    torch.manual_seed(11)
    first = _flat(call())
    second = _flat(call())
    torch.manual_seed(11)
    again = _flat(call())
    assert torch.equal(first, again), "the same seed gave different numbers"
    assert not torch.equal(first, second), "two calls in a row drew the same numbers"


@needs_graphs
@needs_cuda
@pytest.mark.parametrize("op", OPS)
def test_cuda_graph_replays_fresh_noise_and_reproduces_under_the_seed(op):
    # Graphs left over from earlier tests are destroyed here, not at a random moment during this
    # one (a graph's destruction releases its RNG state).
    gc.collect()
    torch.cuda.synchronize()
    call = _random_ops("cuda")[op]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call()  # warm-up outside the graph (lazy init, workspace allocation)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call()

    generator = torch.cuda.default_generators[torch.cuda.current_device()]
    offsets = []  # the generator's (seed, offset) before each replay, for the message

    def replay():
        offsets.append((generator.initial_seed(), generator.get_offset()))
        graph.replay()
        return _flat(out).clone()

    torch.manual_seed(3)
    first, second = replay(), replay()
    torch.manual_seed(3)
    again_first, again_second = replay(), replay()
    assert not torch.equal(first, second), "each replay must draw fresh numbers"
    # Seen now and then on a busy H200 (sessions 3 and 51), never when repeated alone (README, Reliability): say what
    # came out.
    replays = {"first": first, "second": second, "again_first": again_first, "again_second": again_second}
    same = [(a, b) for a in replays for b in replays if a < b and torch.equal(replays[a], replays[b])]
    assert torch.equal(first, again_first) and torch.equal(second, again_second), (
        f"replays ignore the seed: (seed, offset) before each replay {offsets}; equal pairs {same}")
    torch.manual_seed(3)
    eager = _flat(call())
    assert torch.equal(eager, first), "a replay after manual_seed differs from the eager call after it"
    graph.reset()
