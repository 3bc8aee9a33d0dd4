#!/usr/bin/env python3
"""Usage (from docs/results/pragh): python3 paper/schemes-stop40/pool.py. Every R-MAT 26
Split+Cache run with stop 36's report threshold (report_count_min 8): stop 38's five-run
table and its two threshold-8 pairs, stop 39's two runs, stop 40's five. Prints each run's
remote GETs, warm-up and round-2 share of approvals, the pooled median, and every numeric
row field whose correlation with the remote-GET share across the runs is beyond +-0.4."""
import glob, json, statistics as st

files = (["paper/schemes-stop38/pragh-schemes.runs.json",
          "paper/schemes-stop40/pragh-schemes.runs.json"]
         + sorted(glob.glob("stop39/paper/*/pragh-schemes.runs.json"))
         + sorted(glob.glob("stop38/paper-rmin/out-min8*/pragh-schemes.runs.json")))
rows = [(f, r) for f in files for run in json.load(open(f)) for r in run
        if r["scheme"] == "Split+Cache"]

def corr(a, b):
    ma, mb = st.mean(a), st.mean(b)
    n = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    d = (sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5
    return n / d if d else float("nan")

y = [r["remote_gets"] for _, r in rows]
for f, r in rows:
    a = r["warm_rounds_approved"]
    print(f"{f:55s} remote GETs {100 * r['remote_gets']:.2f}%  warm-up {r['warm_s']:5.0f} s"
          f"  round 2 {a[1] / sum(a):.3f} of {sum(a)} approved  {r['throughput_qps']:,.0f} q/s")
print(f"{len(rows)} runs: remote GETs median {100 * st.median(y):.2f}% "
      f"[{100 * min(y):.2f}-{100 * max(y):.2f}]")
x = [r["warm_rounds_approved"][1] / sum(r["warm_rounds_approved"]) for _, r in rows]
print(f"corr(round-2 share of approvals, remote GETs) {corr(x, y):+.2f}")
for k, v in rows[0][1].items():
    vals = [r.get(k) for _, r in rows]
    if k.startswith("remote") or not all(type(v) in (int, float) for v in vals):
        continue
    if len(set(vals)) > 1 and abs(corr(vals, y)) > 0.4:
        print(f"corr({k}, remote GETs) {corr(vals, y):+.2f}")
print("corr(warm_s, remote GETs) %+.2f" % corr([r["warm_s"] for _, r in rows], y))
