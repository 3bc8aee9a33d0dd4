"""Rows of `bench pragh` runs by build, side by side: each scheme's vs Orig, vs Ideal,
remote GETs, GETs per query and warm-up seconds in every run, and the rounds' Split+Cache /
Cache where both ran.

usage: python3 ab.py EXPERIMENT PREFIX [PREFIX ...]   (EXPERIMENT: uniform or schemes)
"""
import glob
import json
import sys

exp = sys.argv[1]
for prefix in sys.argv[2:]:
    dirs = sorted(glob.glob(f"{prefix}_*/pragh-{exp}.json"))
    print(f"{prefix}: {len(dirs)} runs")
    runs = [{r["scheme"]: r for r in json.load(open(d))} for d in dirs]
    for s in runs[0]:
        cells = lambda key, fmt: " ".join(fmt % run[s].get(key, 0) for run in runs)
        print(f"  {s:12} vs Orig {cells('vs_orig', '%.3f')}  vs Ideal {cells('vs_ideal', '%.3f')}"
              f"  remote GETs {cells('remote_gets', '%.4f')}  GETs/q {cells('gets_per_query', '%.2f')}"
              f"  warm s {cells('warm_s', '%.1f')}")
    ratios = []
    for d in dirs:
        for rnd in json.load(open(d.replace(".json", ".runs.json"))):
            q = {r["scheme"]: r["throughput_qps"] for r in rnd}
            if "Cache" in q and "Split+Cache" in q:
                ratios.append(q["Split+Cache"] / q["Cache"])
    if ratios:
        print(f"  Split+Cache / Cache by round: {' '.join('%.3f' % x for x in ratios)}")
