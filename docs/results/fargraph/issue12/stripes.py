#!/usr/bin/env python3
"""BFS on R-MAT 20 from the hub: stripe widths vs before, Oracle and far 0.8, interleaved."""
import json, subprocess, sys
BEFORE = "/work/scratch/locus-before-179f8ba"
AFTER = "/work/scratch/locus-ana2-head"
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
algo = sys.argv[2] if len(sys.argv) > 2 else "bfs"
base = ["analytics", "run", "--rmat-scale", "20", "--threads", "2", "--json", "--algo", algo]
cfgs = []
for be, extra in [("local", []), ("far", ["--far-ratio", "0.8"])]:
    cfgs.append((be, "before", BEFORE, ["--backend", be, *extra]))
    for ids in ["1024", "8192", "0"]:
        cfgs.append((be, f"stripes {ids}", AFTER, ["--backend", be, *extra, "--stripe-ids", ids]))
res = {}
for r in range(ROUNDS):
    for be, name, binary, extra in cfgs:
        out = subprocess.run([binary, *base, *extra], capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr); sys.exit(1)
        j = json.loads(out.stdout)
        res.setdefault((be, name), []).append((j["time_s"], j["bytes_fetched"], j["digest"]))
        print(f"[{r}] {be:6} {name:14} {j['time_s']:.3f} s fetched {j['bytes_fetched']} digest {j['digest']}", flush=True)
print(f"\n| backend | {algo} variant | median (s) | min-max (s) | bytes fetched | digest |\n|---|---|---|---|---|---|")
for (be, name), xs in res.items():
    t = sorted(x[0] for x in xs)
    print(f"| {be} | {name} | {t[len(t)//2]:.3f} | {t[0]:.3f}-{t[-1]:.3f} | {xs[0][1]:,} | {xs[0][2]} |")
