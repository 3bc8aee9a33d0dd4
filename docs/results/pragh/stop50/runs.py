"""Per run of `bench pragh uniform --schemes Orig,Orig-again,Split`: the
median over its rounds of Split / Orig, Orig-again / Orig, and Split /
Orig-again (Split against the A/A control of the same round).

usage: python3 runs.py DIR [DIR ...]   (each DIR holds pragh-uniform.runs.json)
"""
import json
import statistics as st
import sys

for d in sys.argv[1:]:
    rounds = json.load(open(f"{d}/pragh-uniform.runs.json"))
    by = [{r["scheme"]: r["vs_orig"] for r in rnd} for rnd in rounds]
    split = [b["Split"] for b in by]
    again = [b["Orig-again"] for b in by]
    print(
        f"{d:14} rounds {len(by)}  Split/Orig {st.median(split):.4f}"
        f"  Orig-again/Orig {st.median(again):.4f}"
        f"  Split/Orig-again {st.median([s / a for s, a in zip(split, again)]):.4f}"
    )
