#!/usr/bin/env python3
"""Compact grid, before/after: BFS, WCC, PageRank and Radii on R-MAT SCALE, Oracle (local) and
far at ratio 0.8, 2 threads, interleaved, ROUNDS rounds; medians with min-max.

  before      the base binary (cf8fbda): automatic P (L2-sized), 8-byte edges
  after       this branch's defaults as run (binary of 8ef8fd6): BFS, WCC, Radii compact
              (width <= 2^16, 4-byte edges); PageRank auto (L2-sized P, wide at R-MAT 20).
              Since 051ace9 WCC defaults to auto as well (R-MAT 22 result).
  after-alt   this branch with the other layout: --edge-layout wide for BFS, WCC, Radii (the
              before grid), --edge-layout compact for PageRank (width <= 2^16, 4-byte edges)

usage: bench.py BEFORE_BINARY AFTER_BINARY [SCALE] [ROUNDS] [ALGOS] [VARIANTS] > log;
writes compact-SCALE.json. ALGOS and VARIANTS are comma lists (default: all).
"""
import json, os, subprocess, sys, statistics

BEFORE, AFTER = sys.argv[1], sys.argv[2]
SCALE = sys.argv[3] if len(sys.argv) > 3 else "20"
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 3
def variants(algo):
    alt = "compact" if algo == "pagerank" else "wide"
    return [
        ("before", BEFORE, []),
        ("after", AFTER, []),
        ("after-alt", AFTER, ["--edge-layout", alt]),
    ]
backends = [("local", ["--backend", "local"]), ("far0.8", ["--backend", "far", "--far-ratio", "0.8"])]
algos = (sys.argv[5] if len(sys.argv) > 5 else "bfs,wcc,pagerank,radii").split(",")
keep = (sys.argv[6] if len(sys.argv) > 6 else "before,after,after-alt").split(",")

def load():
    return os.getloadavg()[0]

res = {}
loads = []
for r in range(ROUNDS):
    loads.append(load())
    for algo in algos:
        for bname, bargs in backends:
            for vname, binary, extra in [v for v in variants(algo) if v[0] in keep]:
                cmd = [binary, "analytics", "run", "--rmat-scale", SCALE, "--algo", algo,
                       "--threads", "2", "--json", *bargs, *extra]
                out = subprocess.run(cmd, capture_output=True, text=True)
                if out.returncode != 0:
                    print(" ".join(cmd), out.stderr, file=sys.stderr)
                    sys.exit(1)
                j = json.loads(out.stdout)
                rec = {
                    "time_s": j["time_s"], "setup_s": j["setup_s"], "digest": j["digest"],
                    "partitions": j["partitions"], "edge_layout": j.get("edge_layout", "wide"),
                    "bytes_fetched": j["bytes_fetched"], "remote_edge_bytes": j["remote_edge_bytes"],
                    "resident_edge_bytes": j["resident_edge_bytes"], "load": load(),
                }
                res.setdefault(f"{algo}/{bname}/{vname}", []).append(rec)
                print(f"[{r}] {algo:8} {bname:6} {vname:10} {j['time_s']:7.3f} s P={j['partitions']:3} "
                      f"{rec['edge_layout']:7} fetched {j['bytes_fetched']:>11} digest {j['digest']} "
                      f"load {rec['load']:.2f}", flush=True)
loads.append(load())

summary = {}
print()
print(f"R-MAT {SCALE}, 2 threads, {ROUNDS} rounds, load average (1 min) {min(loads):.2f}-{max(loads):.2f}")
print()
print("| algorithm | backend | variant | P | edges | median (s) | min-max (s) | after/before | MB fetched | digest |")
print("|---|---|---|---|---|---|---|---|---|---|")
for key, xs in res.items():
    algo, bname, vname = key.split("/")
    t = [x["time_s"] for x in xs]
    med = statistics.median(t)
    base = statistics.median(x["time_s"] for x in res[f"{algo}/{bname}/before"])
    digests = sorted({x["digest"] for x in xs})
    summary[key] = {"median_s": med, "min_s": min(t), "max_s": max(t), "runs": xs,
                    "ratio_to_before": med / base}
    print(f"| {algo} | {bname} | {vname} | {xs[0]['partitions']} | {xs[0]['edge_layout']} | {med:.3f} | "
          f"{min(t):.3f}-{max(t):.3f} | {med / base:.2f} | {xs[0]['bytes_fetched'] / 1e6:.1f} | {','.join(digests)} |")
with open(f"compact-{SCALE}.json", "w") as f:
    json.dump({"scale": int(SCALE), "rounds": ROUNDS, "threads": 2, "load_min": min(loads),
               "load_max": max(loads), "before": BEFORE, "after": AFTER, "results": summary}, f, indent=1)
