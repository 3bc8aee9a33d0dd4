"""Each scheme against the middle one of the same round (Orig-again), by the round's parity:
even rounds run the order Orig, Orig-again, Split; odd rounds Split, Orig-again, Orig.

usage: python3 place.py PREFIX [PREFIX ...]   (run in the directory that holds the runs)
"""
import glob
import json
import statistics as st
import sys


def f(v):
    return f"{st.mean(v):.4f} ± {st.stdev(v) / len(v) ** 0.5:.4f}"


for p in sys.argv[1:]:
    ev, od = [], []
    for d in sorted(glob.glob(f"{p}_*/pragh-uniform.runs.json")):
        for i, rnd in enumerate(json.load(open(d))):
            b = {r["scheme"]: r["throughput_qps"] for r in rnd}
            pair = (b["Orig"] / b["Orig-again"], b["Split"] / b["Orig-again"])
            (ev if i % 2 == 0 else od).append(pair)
    print(f"{p}: {len(ev) + len(od)} rounds")
    print(f"  even: Orig / Orig-again {f([a for a, _ in ev])}  Split / Orig-again {f([b for _, b in ev])}")
    print(f"  odd:  Orig / Orig-again {f([a for a, _ in od])}  Split / Orig-again {f([b for _, b in od])}")
