"""Session 52: what a capture invalidated by another thread's synchronize leaves behind in torch's allocator and
CUDA generator, step by step (call 1's recovery test showed draws fixed but the next capture into the shared pool
refused with "already recording to mempool_id"). Run as: python failed_capture_probe.py [undo_first]."""
import sys
import threading

import torch


def step(name, fn):
    try:
        out = fn()
        print(f"{name}: ok {'' if out is None else out}")
    except Exception as error:  # noqa: BLE001 - a probe reports every failure
        print(f"{name}: {type(error).__name__}: {str(error).splitlines()[0]}")


def chain(error):
    parts = []
    while error is not None:
        parts.append(f"{type(error).__name__}: {str(error).splitlines()[0]}")
        error = error.__context__
    return " <- ".join(parts)


x = torch.ones(1 << 16, device="cuda")
pool = torch.cuda.graph_pool_handle()
stream = torch.cuda.Stream()
stream.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(stream):
    first = torch.cuda.CUDAGraph()
    first.capture_begin(pool, capture_error_mode="thread_local")
    y = (x * 2).sum()
    first.capture_end()
print("pool", pool, "first.pool()", first.pool())
failed = torch.cuda.CUDAGraph()
with torch.cuda.stream(stream):
    failed.capture_begin(pool, capture_error_mode="thread_local")
    try:
        try:
            a = x * 3
            thread = threading.Thread(target=lambda: step("other thread's synchronize", torch.cuda.synchronize))
            thread.start()
            thread.join()
            b = (a + 1).sum()
        finally:
            failed.capture_end()
    except Exception as error:  # noqa: BLE001
        print("capture raised:", chain(error))
print("stream capturing after:", stream.query() if False else torch.cuda.is_current_stream_capturing())
step("draw", lambda: torch.randn(8, device="cuda").sum().item())
step("endAllocateToPool(pool)", lambda: torch._C._cuda_endAllocateToPool(0, pool))
step("endAllocateToPool(pool) again", lambda: torch._C._cuda_endAllocateToPool(0, pool))


def empty_capture():
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(torch.cuda.Stream()):
        g.capture_begin(capture_error_mode="thread_local")
        g.capture_end()


step("empty capture", empty_capture)
step("draw", lambda: torch.randn(8, device="cuda").sum().item())


def capture_into_pool():
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        g.capture_begin(pool, capture_error_mode="thread_local")
        z = (x * 5).sum()
        g.capture_end()
    g.replay()
    torch.cuda.synchronize()
    return z.item()


step("capture into the shared pool", capture_into_pool)
step("endAllocateToPool(pool) after that", lambda: torch._C._cuda_endAllocateToPool(0, pool))
step("capture into the shared pool again", capture_into_pool)
