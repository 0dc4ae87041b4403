import torch, time, loader
import torch.nn.functional as F
fam = loader.diffusion
def T(f, n):
    f(); t=time.perf_counter()
    for _ in range(n): f()
    return 1e6*(time.perf_counter()-t)/n
for dtype in [torch.float32, torch.bfloat16]:
    for (B, ci, co, L) in [(1,256,256,16),(1,512,512,8),(8,256,512,16),(64,256,512,16)]:
        x = torch.randn(B, ci, L, dtype=dtype); w = torch.randn(co, ci, 5, dtype=dtype) * 0.05
        b = torch.randn(co, dtype=dtype); gw = torch.randn(co, dtype=dtype); gb = torch.randn(co, dtype=dtype)
        reps = 200 if B*co*L < 1e5 else 20
        ours = T(lambda: fam.conv1d_gn_mish(x, w, b, gw, gb, 8), reps)
        eager = T(lambda: F.mish(F.group_norm(F.conv1d(x, w, b, padding=2), 8, gw, gb)), reps)
        print(f"{str(dtype):15s} B={B} {ci}->{co} L={L}: ours {ours:8.1f} us  eager {eager:8.1f} us  {eager/ours:.2f}x")
