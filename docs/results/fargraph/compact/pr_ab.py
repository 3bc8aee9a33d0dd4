#!/usr/bin/env python3
"""PageRank (f32, 20 iterations) on R-MAT 20, Oracle, 2 threads: the base binary against this
branch on the same 8x8 wide grid (the default for PageRank), alternating, ROUNDS rounds: does the
per-layout kernel dispatch cost anything on the path PageRank keeps?
usage: pr_ab.py BEFORE AFTER [ROUNDS]"""
import json, os, subprocess, sys, statistics
BEFORE, AFTER = sys.argv[1], sys.argv[2]
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
args = ["analytics", "run", "--rmat-scale", "20", "--algo", "pagerank", "--backend", "local",
        "--threads", "2", "--json"]
res = {"before": [], "after": []}
loads = [os.getloadavg()[0]]
for r in range(ROUNDS):
    for name, b in ([("before", BEFORE), ("after", AFTER)] if r % 2 == 0 else [("after", AFTER), ("before", BEFORE)]):
        j = json.loads(subprocess.run([b, *args], capture_output=True, text=True, check=True).stdout)
        res[name].append(j["time_s"])
        print(f"[{r}] {name:6} {j['time_s']:.3f} s P={j['partitions']} {j.get('edge_layout', 'wide')} {j['digest']}", flush=True)
    loads.append(os.getloadavg()[0])
for name, t in res.items():
    print(f"{name}: median {statistics.median(t):.3f} s, min-max {min(t):.3f}-{max(t):.3f}")
print(f"load average (1 min) {min(loads):.2f}-{max(loads):.2f}")
