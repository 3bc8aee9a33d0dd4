#!/usr/bin/env python3
"""Usage: spread.py RUNS_JSON. Per-run rows of a `bench pragh` runs.json: each scheme's runs, median
[min-max], max/min, and the host probes measured beside each run."""
import json, statistics, sys

runs = json.load(open(sys.argv[1]))
schemes = [r["scheme"] for r in runs[0]]

def corr(a, b):
    ma, mb = statistics.mean(a), statistics.mean(b)
    num = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    den = (sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5
    return num / den if den else float("nan")

def fmt(v):
    if v > 100:
        return f"{v:,.0f}"
    return f"{v:.5f}" if 0 < v < 0.1 else f"{v:.3f}"

for s in schemes:
    rows = [next(r for r in run if r["scheme"] == s) for run in runs]
    print(f"== {s} ({len(rows)} runs)")
    for key in ["throughput_qps", "vs_orig", "vs_ideal", "remote_gets",
                "migrated_fraction", "replica_share", "warm_s",
                "measure_host_probe_ns", "measure_host_handoff_ns",
                "measure_background_share"]:
        vals = [r.get(key) for r in rows]
        if any(v is None for v in vals):
            continue
        med = statistics.median(vals)
        lo, hi = min(vals), max(vals)
        ratio = f"  max/min {hi / lo:.3f}" if lo > 0 else ""
        print(f"  {key:26s} {' '.join(fmt(v) for v in vals)}  | median {fmt(med)} [{fmt(lo)}-{fmt(hi)}]{ratio}")
    q = [r["throughput_qps"] for r in rows]
    p = [r["measure_host_probe_ns"] for r in rows]
    h = [r["measure_host_handoff_ns"] for r in rows]
    print(f"  corr(qps, host probe) {corr(q, p):+.2f}  corr(qps, handoff) {corr(q, h):+.2f}")
