#!/usr/bin/env python3
"""Prepare once, then BFS from the prepared grid vs from scratch (R-MAT 20), wall time, 3 interleaved rounds."""
import json, subprocess, sys, time, shutil
B = "/work/scratch/locus-ana2-head"
D = "/work/scratch/ana2-cmp/prep20"
shutil.rmtree(D, ignore_errors=True)
t = time.time()
p = subprocess.run([B, "analytics", "prepare", "--rmat-scale", "20", "--algo", "bfs", "--out", D], capture_output=True, text=True)
print(p.stdout, p.stderr, f"prepare wall {time.time()-t:.2f} s", flush=True)
res = {}
for r in range(3):
    for name, args in [("scratch", ["--rmat-scale", "20"]), ("prepared", ["--prepared", D])]:
        t = time.time()
        o = subprocess.run([B, "analytics", "run", "--algo", "bfs", "--backend", "local", "--threads", "2", "--json", *args], capture_output=True, text=True)
        w = time.time() - t
        j = json.loads(o.stdout)
        res.setdefault(name, []).append((w, j["setup_s"], j["time_s"], j["digest"]))
        print(f"[{r}] {name:8} wall {w:.2f} s setup {j['setup_s']:.3f} compute {j['time_s']:.3f} digest {j['digest']}", flush=True)
print("\n| BFS run from | wall (s) | setup (s) | compute (s) |\n|---|---|---|---|")
for n, xs in res.items():
    m = lambda k: sorted(x[k] for x in xs)
    print(f"| {n} | {m(0)[1]:.2f} ({m(0)[0]:.2f}-{m(0)[2]:.2f}) | {m(1)[1]:.3f} | {m(2)[1]:.3f} ({m(2)[0]:.3f}-{m(2)[2]:.3f}) |")
shutil.rmtree(D, ignore_errors=True)
