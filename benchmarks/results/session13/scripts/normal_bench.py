import torch, time, loader, sys
s = loader.sampling
def T(f, n):
    f(); t=time.perf_counter()
    for _ in range(n): f()
    return 1e6*(time.perf_counter()-t)/n
for dtype in [torch.float32, torch.bfloat16, torch.float64]:
    for (n,d) in [(256,50),(1024,10),(4096,50),(65536,50)]:
        mean=torch.zeros(d); std=torch.ones(d)
        reps = 300 if n*d < 1e6 else 20
        ours=T(lambda: s.normal(mean,std,n,dtype=dtype), reps)
        eager=T(lambda: (mean + std*torch.randn(n,d)).to(dtype), reps)
        print(f"{str(dtype):15s} n={n} d={d}: ours {ours:8.1f} us ({1e3*ours/(n*d):.2f} ns/el)  eager {eager:8.1f} us  {eager/ours:.2f}x")
