"""Pools the rounds of several `bench pragh uniform` runs: per scheme, its
throughput over Orig's in the same round (median, mean, sd, rounds at or
above 1), values moved, and the monitor's and coordinator's CPU per window.

usage: python3 pool.py DIR [DIR ...]   (each DIR holds pragh-uniform.runs.json)
"""
import json
import statistics as st
import sys

rounds = []
for d in sys.argv[1:]:
    rounds += json.load(open(f"{d}/pragh-uniform.runs.json"))
for s in [r["scheme"] for r in rounds[0]]:
    rows = [{r["scheme"]: r for r in rnd}[s] for rnd in rounds]
    v = [r["vs_orig"] for r in rows]
    ms = lambda g: st.median(r["measure_cpu_s"].get(g, 0) * 1e3 for r in rows)
    sd = st.stdev(v) if len(v) > 1 else 0.0
    print(
        f"{s:12} vs Orig median {st.median(v):.4f} mean {st.mean(v):.4f} sd {sd:.4f}"
        f" >=1 in {sum(x >= 1 for x in v)}/{len(v)};"
        f" moved median {st.median(r['values_moved'] for r in rows)};"
        f" monitor {ms('locus-monitor'):.2f} ms, coordinator {ms('locus-coordinat'):.2f} ms a window"
    )
