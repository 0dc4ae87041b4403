import torch, time, loader
e = loader.ebm
def T(f, n):
    f(); t=time.perf_counter()
    for _ in range(n): f()
    return 1e6*(time.perf_counter()-t)/n
x = torch.randn(1 << 20, 16); g = torch.randn_like(x)
print(f"ebm langevin_step 2^20x16 float32: {T(lambda: e.langevin_step(x, g, 0.01), 10):.1f} us")
x2 = torch.randn(32768, 16)
print(f"ebm langevin_chain harmonic 32768x16 20 steps: {T(lambda: e.langevin_chain(x2, 'harmonic', 20, 0.01), 5):.1f} us")
