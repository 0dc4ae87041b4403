"""Several processes: distributed_chain (ebm) and distributed_cem_minimize (sampling) over two
gloo ranks on the CPU give what one process gives with the same seeds."""
import math
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import loader

WORLD = 2
B, D, STEPS = 32, 4, 20
F32_MAX = torch.finfo(torch.float32).max
CEM = dict(n_samples=48, n_elite=12, n_iters=4, smoothing=0.1, min_std=1e-3)


def sphere(x):
    return (x - 0.5).pow(2).sum(1)


def _worker(rank, store_path, result_path):
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=WORLD)
    try:
        ebm, sampling = loader.ebm, loader.sampling
        x = torch.randn(B, D, generator=torch.Generator().manual_seed(100 + rank))
        langevin = ebm.distributed_chain(x, "double_well", STEPS, 0.01, seed=7, barrier_height=1.0)
        hmc = ebm.distributed_chain(x, "harmonic", STEPS, 0.1, sampler="hmc", seed=7, n_leapfrog=3, k=2.0)
        cem = sampling.distributed_cem_minimize(sphere, torch.zeros(D), torch.ones(D), seed=3, **CEM)
        langevin_thin = ebm.distributed_chain(x, "double_well", STEPS, 0.01, seed=7, thin=5, barrier_height=1.0)
        hmc_thin = ebm.distributed_chain(x, "harmonic", STEPS, 0.1, sampler="hmc", seed=7, thin=5, n_leapfrog=3,
                                         k=2.0)
        results = {"langevin": langevin, "hmc": hmc, "cem": tuple(cem), "langevin_thin": langevin_thin,
                   "hmc_thin": hmc_thin}
        torch.save(results, f"{result_path}.{rank}")
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def gathered(tmp_path_factory):
    loader.load("ebm"), loader.load("sampling")  # build once here, not in both ranks
    tmp = tmp_path_factory.mktemp("dist")
    mp.spawn(_worker, args=(str(tmp / "store"), str(tmp / "result")), nprocs=WORLD, join=True)
    return [torch.load(f"{tmp}/result.{rank}", weights_only=False) for rank in range(WORLD)]


def _single_process_chains(sampler, model, step_size, **kwargs):
    """The ranks' work done in one process: rank r's rows with a generator seeded 7 + r."""
    chain = loader.ebm.langevin_chain if sampler == "langevin" else loader.ebm.hmc_chain
    outs = []
    for rank in range(WORLD):
        x = torch.randn(B, D, generator=torch.Generator().manual_seed(100 + rank))
        out = chain(x, model, STEPS, step_size, generator=torch.Generator().manual_seed(7 + rank), **kwargs)
        outs.append(out)
    return outs


def test_langevin_ranks_equal_single_process(gathered):
    expected = torch.cat(_single_process_chains("langevin", "double_well", 0.01, barrier_height=1.0))
    for samples, stats in (result["langevin"] for result in gathered):
        torch.testing.assert_close(samples, expected, rtol=0, atol=0)
        torch.testing.assert_close(stats["mean"], expected.double().mean(0))
        torch.testing.assert_close(stats["cov"], torch.cov(expected.double().T, correction=0))
        assert stats["n"] == WORLD * B


def test_hmc_ranks_equal_single_process(gathered):
    parts = _single_process_chains("hmc", "harmonic", 0.1, n_leapfrog=3, k=2.0)
    expected = torch.cat([out for out, _ in parts])
    accept = torch.cat([acc for _, acc in parts]).double().mean()
    for samples, stats in (result["hmc"] for result in gathered):
        torch.testing.assert_close(samples, expected, rtol=0, atol=0)
        torch.testing.assert_close(stats["accept_rate"], accept)


@pytest.mark.parametrize("sampler", ["langevin", "hmc"])
def test_thinned_trajectories_are_gathered_like_the_samples(gathered, sampler):
    """thin > 0 adds every rank's trajectory, stacked along the rows (it raised until session 40)."""
    if sampler == "langevin":
        parts = _single_process_chains("langevin", "double_well", 0.01, thin=5, barrier_height=1.0)
    else:
        parts = [(out, traj) for out, _, traj in _single_process_chains("hmc", "harmonic", 0.1, thin=5, n_leapfrog=3,
                                                                         k=2.0)]
    expected = torch.cat([out for out, _ in parts])
    expected_traj = torch.cat([traj for _, traj in parts], 1)
    assert expected_traj.shape == (STEPS // 5, WORLD * B, D)
    for samples, stats, traj in (result[f"{sampler}_thin"] for result in gathered):
        torch.testing.assert_close(samples, expected, rtol=0, atol=0)
        torch.testing.assert_close(traj, expected_traj, rtol=0, atol=0)
        assert stats["n"] == WORLD * B


def test_cem_ranks_equal_single_process_with_the_whole_population(gathered):
    sampling = loader.sampling
    generators = [torch.Generator().manual_seed(3 + rank) for rank in range(WORLD)]
    mean, std = torch.zeros(D), torch.ones(D)
    best = torch.tensor(float("inf"))
    for _ in range(CEM["n_iters"]):
        population = torch.cat([sampling.normal(mean, std, CEM["n_samples"], generator=g) for g in generators])
        scores = sphere(population)
        best = torch.minimum(best, scores.min())
        mean, std = sampling.cem_update(population, scores, CEM["n_elite"], mean, std, CEM["smoothing"],
                                        CEM["min_std"])
    for result in gathered:
        got_mean, got_std, best_x, best_value, history = result["cem"]
        torch.testing.assert_close(got_mean, mean)
        torch.testing.assert_close(got_std, std)
        torch.testing.assert_close(best_value, best)
        torch.testing.assert_close(sphere(best_x[None])[0], best)
        assert history.shape == (CEM["n_iters"],)


def test_bad_sampler_names_the_argument():
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        with pytest.raises(ValueError, match="sampler"):
            loader.ebm.distributed_chain(torch.zeros(2, 2), "harmonic", 1, 0.1, sampler="gibbs")
        with pytest.raises(ValueError, match="n_elite"):
            loader.sampling.distributed_cem_minimize(sphere, torch.zeros(2), torch.ones(2), 4, 5, 1)
    finally:
        dist.destroy_process_group()


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("scores, maximize", [([math.inf, F32_MAX, math.inf, F32_MAX], False),
                                              ([-F32_MAX, -math.inf, -F32_MAX, -math.inf], False),
                                              ([F32_MAX, math.inf, F32_MAX, math.inf], True)])
def test_cem_elite_ranks_infinite_scores_as_cem_update_does(scores, maximize):
    """One rank computes what cem_minimize computes with the same generator: the global elite had been chosen on
    torch.nan_to_num(nan=inf) keys, which turned +-inf into +-finfo.max, so an infinite score tied with the largest
    finite one and the lower row entered the elite (here the worse row: n_elite=1, the refit's mean was that row)."""
    values = torch.tensor(scores)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        got = loader.sampling.distributed_cem_minimize(lambda x: values, torch.zeros(2), torch.ones(2), 4, 1, 1,
                                                       maximize=maximize, seed=5)
    finally:
        dist.destroy_process_group()
    want = loader.sampling.cem_minimize(lambda x: values, torch.zeros(2), torch.ones(2), 4, 1, 1, maximize=maximize,
                                        generator=torch.Generator().manual_seed(5))
    for name, g, w in zip(want._fields, got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=0, msg=name)


# ---------------------------------------------------------------- session 46's API review

@pytest.mark.parametrize("sampler", ["langevin", "hmc"])
def test_distributed_chain_says_to_pass_seed_for_a_generator(sampler):
    """langevin_chain and hmc_chain take generator=, and distributed_chain passes its kwargs on to them, so
    distributed_chain(..., generator=g) raised Python's "langevin_chain() got multiple values for keyword argument
    'generator'" from a module named after the build (distributed_chain makes each rank's generator from seed)."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        with pytest.raises(TypeError, match=r"distributed_chain .*seed.*seed \+ rank.*not generator"):
            loader.ebm.distributed_chain(torch.zeros(2, 2), "harmonic", 1, 0.1, sampler=sampler,
                                         generator=torch.Generator())
    finally:
        dist.destroy_process_group()
