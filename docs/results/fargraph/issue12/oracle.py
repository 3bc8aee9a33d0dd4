#!/usr/bin/env python3
"""R-MAT 20 Oracle PageRank/BFS/WCC: before (179f8ba) vs after, interleaved, 3 rounds, 2 threads."""
import json, subprocess, sys, statistics, os
BEFORE = "/work/scratch/locus-before-179f8ba"
AFTER = sys.argv[1]
SCALE = sys.argv[2] if len(sys.argv) > 2 else "20"
ROUNDS = 3
base = ["analytics", "run", "--rmat-scale", SCALE, "--backend", "local", "--threads", "2", "--json"]
cfgs = [
    ("pagerank", "before", BEFORE, []),
    ("pagerank", "after-f32", AFTER, ["--precision", "f32"]),
    ("pagerank", "after-f64", AFTER, ["--precision", "f64"]),
    ("bfs", "before", BEFORE, []),
    ("bfs", "after", AFTER, []),
    ("wcc", "before", BEFORE, []),
    ("wcc", "after", AFTER, []),
]
res = {}
for r in range(ROUNDS):
    for algo, name, binary, extra in cfgs:
        out = subprocess.run([binary, *base, "--algo", algo, *extra], capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr); sys.exit(1)
        j = json.loads(out.stdout)
        res.setdefault((algo, name), []).append((j["time_s"], j["setup_s"], j["digest"], j["partitions"], j.get("bytes_fetched")))
        print(f"[{r}] {algo:8} {name:10} {j['time_s']:.3f} s setup {j['setup_s']:.2f} P={j['partitions']} digest {j['digest']}", flush=True)
print()
print("| algorithm | variant | median (s) | min-max (s) | digest |")
print("|---|---|---|---|---|")
for (algo, name), xs in res.items():
    t = sorted(x[0] for x in xs)
    print(f"| {algo} | {name} | {t[1]:.3f} | {t[0]:.3f}-{t[-1]:.3f} | {xs[0][2]} |")
