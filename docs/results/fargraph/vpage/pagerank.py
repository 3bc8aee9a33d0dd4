#!/usr/bin/env python3
"""PageRank (R-MAT 20, f32, 20 iterations, 2 threads) on far, paged (readahead 8) and paged with
--paged-vertices (readahead 8) at several far ratios; 3 rounds, configurations interleaved within
each round. Usage: pagerank.py LOCUS_BINARY OUT.json"""
import json, subprocess, sys, statistics, os

locus, out = sys.argv[1], sys.argv[2]
ratios = [0.5, 0.8, 0.9, 0.95]
configs = [("far", []), ("paged", []), ("paged-vertices", ["--paged-vertices"])]
runs = []
load = [os.getloadavg()[0]]
for rnd in range(3):
    for r in ratios:
        for name, extra in configs:
            backend = "paged" if name.startswith("paged") else name
            cmd = [locus, "analytics", "run", "--algo", "pagerank", "--rmat-scale", "20",
                   "--backend", backend, "--far-ratio", str(r), "--threads", "2", "--json"] + extra
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            if p.returncode != 0:
                sys.exit(f"{cmd} failed: {p.stderr}")
            rep = json.loads(p.stdout)
            runs.append({"round": rnd, "ratio": r, "config": name, "report": rep})
            print(f"[{rnd}] {name:<15} {r:.2f} {rep['time_s']:8.3f} s digest {rep['digest']}", flush=True)
    load.append(os.getloadavg()[0])
rows = []
for r in ratios:
    row = {"far_ratio": r}
    for name, _ in configs:
        ts = [x["report"]["time_s"] for x in runs if x["ratio"] == r and x["config"] == name]
        row[name] = {"median_s": statistics.median(ts), "min_s": min(ts), "max_s": max(ts)}
        if name == "paged-vertices":
            med = sorted((x for x in runs if x["ratio"] == r and x["config"] == name),
                         key=lambda x: x["report"]["time_s"])[1]
            row[name]["vertex_paging"] = med["report"]["vertex_paging"]
    rows.append(row)
digests = {x["report"]["digest"] for x in runs}
json.dump({"load_1min": load, "rows": rows, "same_digest": len(digests) == 1, "runs": runs},
          open(out, "w"), indent=1)
print(json.dumps({"load_1min": load, "rows": rows, "same_digest": len(digests) == 1}, indent=1))
