"""Langevin, HMC and CEM spread over the GPUs of a host (or hosts) with torch.distributed.

    torchrun --nproc_per_node=2 examples/multi_gpu_sampling.py            # NCCL, one GPU per rank
    torchrun --nproc_per_node=2 examples/multi_gpu_sampling.py --device cpu --batch 8192 --steps 100   # gloo
    python examples/multi_gpu_sampling.py                                  # one process (world of 1)

Each rank samples its share of the chains with its own seed stream (seed + rank) through
loader.ebm.distributed_chain, and CEM splits its population over the ranks with a global elite
(loader.sampling.distributed_cem_minimize). Strong scaling: the total batch is fixed; rank 0 first
times the whole batch alone on its GPU (the one-GPU baseline), then all ranks share it.
Prints per-rank and total samples/s and the scaling efficiency = t(1 GPU) / (N * t(N GPUs)).
"""
import argparse
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import loader  # noqa: E402


def timed(fn, device):
    """Seconds of one fn() call after a warm-up call, synchronizing the device."""
    fn()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    result = fn()
    sync()
    return time.perf_counter() - start, result


def rastrigin(x):
    return 10 * x.shape[1] + (x * x - 10 * torch.cos(2 * torch.pi * x)).sum(1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, default=2 ** 20, help="chains in total, split over the ranks")
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--cem-samples", type=int, default=65536, help="CEM population in total")
    parser.add_argument("--cem-dim", type=int, default=1000)
    parser.add_argument("--cem-iters", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="unused; accepted like the other examples")
    args = parser.parse_args(argv)

    if "RANK" not in os.environ:  # plain `python`: a world of one
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29531")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # no NVLink multicast (not lent on our machines)
    local_rank = int(os.environ["LOCAL_RANK"])
    if args.device == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", device_id=device if device.type == "cuda" else None)
    rank, world = dist.get_rank(), dist.get_world_size()
    ebm, sampling = loader.ebm, loader.sampling  # every rank loads; the cache lock makes one of them build
    if args.batch % world:
        raise SystemExit(f"--batch {args.batch} must be divisible by the number of ranks {world}")
    local_batch = args.batch // world

    def say(*parts):
        if rank == 0:
            print(*parts, flush=True)

    say(f"{world} rank(s), backend {dist.get_backend()}, device {device.type}; "
        f"B={args.batch} D={args.dim} steps={args.steps}")
    mean = torch.linspace(-1, 1, args.dim, device=device)
    precision = torch.eye(args.dim, device=device) * 4 + 0.5
    chains = {
        "langevin": dict(step_size=0.01, sampler="langevin"),
        "hmc": dict(step_size=0.05, sampler="hmc", n_leapfrog=5),
    }
    for name, kw in chains.items():
        kw = dict(kw)
        step_size = kw.pop("step_size")
        run_steps = args.steps if name == "langevin" else max(1, args.steps // 10)

        def one_gpu():  # rank 0 alone with the whole batch: the baseline
            x = torch.zeros(args.batch, args.dim, device=device)
            chain = ebm.langevin_chain if name == "langevin" else ebm.hmc_chain
            extra = {k: v for k, v in kw.items() if k != "sampler"}
            return chain(x, "gaussian", run_steps, step_size, mean=mean, precision=precision, **extra)

        t_one = timed(one_gpu, device)[0] if rank == 0 else 0.0
        dist.barrier()

        def shared():
            x = torch.zeros(local_batch, args.dim, device=device)
            out = ebm.distributed_chain(x, "gaussian", run_steps, step_size, seed=args.seed, mean=mean,
                                        precision=precision, **kw)
            return out

        t_local, (samples, stats) = timed(shared, device)
        times = [torch.zeros(1, dtype=torch.float64, device=device) for _ in range(world)]
        dist.all_gather(times, torch.tensor([t_local], dtype=torch.float64, device=device))
        times = [t.item() for t in times]
        t_all = max(times)
        for r, t in enumerate(times):
            say(f"  {name} rank {r}: {local_batch * run_steps / t:.3e} chain-steps/s ({t * 1e3:.1f} ms)")
        err = (stats["mean"] - mean.double()).abs().max().item()
        cov_err = (stats["cov"] - torch.linalg.inv(precision.double())).abs().max().item()
        extra = f", accept rate {stats['accept_rate'].item():.3f}" if "accept_rate" in stats else ""
        say(f"{name}: {run_steps} steps, gathered {tuple(samples.shape)}; total {args.batch * run_steps / t_all:.3e}"
            f" chain-steps/s; one rank alone {t_one * 1e3:.1f} ms, {world} ranks {t_all * 1e3:.1f} ms; "
            f"scaling efficiency {t_one / (world * t_all):.1%}; |mean err| {err:.3f}, |cov err| {cov_err:.3f}{extra}")

    # CEM: the population is split over the ranks, the elite is global.
    n_local = args.cem_samples // world
    mean0 = torch.full((args.cem_dim,), 2.5, device=device)
    std0 = torch.full((args.cem_dim,), 2.0, device=device)

    def cem():
        return sampling.distributed_cem_minimize(rastrigin, mean0, std0, n_local, max(1, args.cem_samples // 10),
                                                 args.cem_iters, smoothing=0.1, min_std=1e-3, seed=args.seed)

    t_cem, result = timed(cem, device)
    say(f"cem: d={args.cem_dim}, population {n_local * world} over {world} rank(s), {args.cem_iters} iterations "
        f"in {t_cem * 1e3:.1f} ms; best value {result.best_value.item():.2f} (start {rastrigin(mean0[None]).item():.0f})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
