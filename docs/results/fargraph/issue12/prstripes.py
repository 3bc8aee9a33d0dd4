#!/usr/bin/env python3
"""PageRank (20 it.) on R-MAT 20, Oracle, 2 threads: stripe widths vs before, interleaved."""
import json, subprocess, sys
BEFORE = "/work/scratch/locus-before-179f8ba"
AFTER = "/work/scratch/locus-ana2-head"
ROUNDS = 3
base = ["analytics", "run", "--rmat-scale", "20", "--threads", "2", "--json", "--algo", "pagerank", "--backend", "local"]
cfgs = [("before (f64)", BEFORE, [])]
for prec in ["f64", "f32"]:
    for ids in ["8192", "0"]:
        cfgs.append((f"{prec} stripes {ids}", AFTER, ["--precision", prec, "--stripe-ids", ids]))
res = {}
for r in range(ROUNDS):
    for name, binary, extra in cfgs:
        out = subprocess.run([binary, *base, *extra], capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr); sys.exit(1)
        j = json.loads(out.stdout)
        res.setdefault(name, []).append((j["time_s"], j["digest"]))
        print(f"[{r}] {name:18} {j['time_s']:.3f} s digest {j['digest']}", flush=True)
print("\n| PageRank variant | median (s) | min-max (s) | digest |\n|---|---|---|---|")
for name, xs in res.items():
    t = sorted(x[0] for x in xs)
    print(f"| {name} | {t[len(t)//2]:.3f} | {t[0]:.3f}-{t[-1]:.3f} | {xs[0][1]} |")
