import os, subprocess, sys
for rnd in range(2):
    for v in ["0", "64", "256", "32"]:
        out = subprocess.run([sys.executable, "tools/profile_ops.py", "--ours-only", "diffusion conv1d_gn_mish B=256 float32"],
                             env=dict(os.environ, JK_GN_THREADS=v), capture_output=True, text=True).stdout
        gn = [l for l in out.splitlines() if "gn_mish_kernel" in l]
        ours = [l for l in out.splitlines() if "ours:" in l]
        print(f"round {rnd} JK_GN_THREADS={v}: {ours[0].strip() if ours else '?'} | {gn[0].strip()[:60] if gn else out[-500:]}", flush=True)
