"""Pools the rounds of every `bench pragh uniform --schemes Orig,Orig-again,Split` run
whose directory starts with one of the given prefixes: Split / Orig and Split / Orig-again
per round (mean, median, standard error of the mean, rounds at or above 1) and the same
taken run by run (each run the mean of its rounds).

usage: python3 groups.py PREFIX [PREFIX ...]   (run in the directory that holds the runs)
"""
import glob
import json
import statistics as st
import sys


def summary(xs):
    se = st.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else float("nan")
    above = sum(x >= 1 for x in xs)
    return f"mean {st.mean(xs):.4f} median {st.median(xs):.4f} se {se:.4f} ({above}/{len(xs)} >= 1)"


for prefix in sys.argv[1:]:
    rounds, runs = [], []
    for d in sorted(glob.glob(f"{prefix}_*/pragh-uniform.runs.json")):
        by = [{r["scheme"]: r["vs_orig"] for r in rnd} for rnd in json.load(open(d))]
        these = [(b["Split"], b["Split"] / b["Orig-again"], b["Orig-again"]) for b in by]
        rounds += these
        runs.append(tuple(st.mean(t[i] for t in these) for i in range(3)))
    if not rounds:
        print(f"{prefix}: no runs")
        continue
    print(f"{prefix}: {len(runs)} runs, {len(rounds)} rounds")
    print(f"  rounds  Split/Orig       {summary([r[0] for r in rounds])}")
    print(f"  rounds  Split/Orig-again {summary([r[1] for r in rounds])}")
    print(f"  rounds  Orig-again/Orig  {summary([r[2] for r in rounds])}")
    print(f"  runs    Split/Orig-again {summary([r[1] for r in runs])}")
