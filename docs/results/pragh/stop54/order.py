"""Split / Orig in `bench pragh uniform --schemes Orig,Orig-again,Split` runs, by which
scheme the round's order put first, and the row each run printed.

usage: python3 order.py rev|bal PREFIX [PREFIX ...]   (run in the directory that holds the runs)
  rev: rounds in the given order, reversed every other round (before stop 54)
  bal: rounds in the balanced (Williams) order of `round_order` (stop 54)
"""
import glob
import json
import statistics as st
import sys

NAMES = ["Orig", "Orig-again", "Split"]


def order(n, rnd, balanced):
    if not balanced or n < 3:
        o = list(range(n))
        return o[::-1] if rnd % 2 else o
    cycle = n if n % 2 == 0 else 2 * n
    k = rnd % cycle
    o = [((j + 1) // 2 if j % 2 else (n - j // 2) % n) for j in range(n)]
    o = [(b + k) % n for b in o]
    return o[::-1] if k >= n else o


def mid(xs):
    v = sorted(xs)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def summary(xs):
    if not xs:
        return "-"
    se = st.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else float("nan")
    return f"{st.mean(xs):.4f} ± {se:.4f} ({len(xs)})"


if __name__ == "__main__":
    mode = sys.argv[1]
    for prefix in sys.argv[2:]:
        by_first = {name: [] for name in NAMES}
        everything, printed = [], []
        per_run = {"Orig-again": [], "Split": []}
        for d in sorted(glob.glob(f"{prefix}_*/pragh-uniform.runs.json")):
            for name in per_run:
                per_run[name].append([])
            for rnd, rows in enumerate(json.load(open(d))):
                for name in per_run:
                    per_run[name][-1].append({r["scheme"]: r["vs_orig"] for r in rows}[name])
                ratio = {r["scheme"]: r["vs_orig"] for r in rows}["Split"]
                first = NAMES[order(3, rnd, mode == "bal")[0]]
                by_first[first].append(ratio)
                everything.append(ratio)
            rows = json.load(open(d.replace(".runs.json", ".json")))
            printed.append({r["scheme"]: r["vs_orig"] for r in rows}["Split"])
        print(f"{prefix}: Split / Orig over all rounds {summary(everything)}")
        for name in NAMES:
            print(f"  {name} first: {summary(by_first[name])}")
        print(f"  printed rows: {' '.join(f'{x:.4f}' for x in printed)}; "
              f"at or above 1: {sum(x >= 1 for x in printed)} of {len(printed)}")
        for name in ("Orig-again", "Split"):
            mids = [mid(r) for r in per_run[name]]
            print(f"  {name} / Orig, each run's median (an even count: the middle pair's mean): "
                  f"{' '.join(f'{x:.4f}' for x in mids)}; at or above 1: "
                  f"{sum(x >= 1 for x in mids)} of {len(mids)}")
