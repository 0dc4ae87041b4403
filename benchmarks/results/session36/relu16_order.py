"""bfloat16 relu_add 2^21 on one thread, AVX-512 path: session 35's build (ab/s36/base512) against this
tree's, 40 rounds with the order alternating (a round's first timing is never always the same build's),
best-of-20 per timing; then the instructions of both builds' AVX-512 loops compared.
    python relu16_order.py"""
import subprocess
import sys
import time

import torch

sys.path.insert(0, ".")
import loader

torch.set_num_threads(1)
builds = {"base512": loader.load("fused", root="ab/s36/base512/kernels"), "new": loader.load("fused")}
x, y = torch.randn(1 << 21).bfloat16(), torch.randn(1 << 21).bfloat16()
assert torch.equal(builds["base512"].relu_add(x, y, 0.5).view(torch.int16), builds["new"].relu_add(x, y, 0.5).view(torch.int16))
best = {name: [] for name in builds}
for round_ in range(40):
    order = list(builds) if round_ % 2 == 0 else list(reversed(builds))
    for name in order:
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            builds[name].relu_add(x, y, 0.5)
            times.append(time.perf_counter() - t0)
        best[name].append(min(times) * 1e6)
for name, values in best.items():
    values.sort()
    print(f"{name:8s} best {values[0]:7.1f}  median of rounds {values[len(values) // 2]:7.1f} us")
listings = []
for name, family in builds.items():
    dump = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", str(family.library)], capture_output=True, text=True).stdout
    start = dump.find("<void jk::cpu_loop16_avx512<c10::BFloat16, fused::ReluAdd")
    body = dump[start:dump.find("\n\n", start)].splitlines()[1:]
    listings.append([line.split("\t")[-1].split("#")[0].strip() for line in body])
    print(f"{name}: {len(listings[-1])} instructions in its AVX-512 bfloat16 relu_add loop")
same_ops = [a.split()[0] for a in listings[0]] == [b.split()[0] for b in listings[1]]
print("same opcodes in the same order:", same_ops)
