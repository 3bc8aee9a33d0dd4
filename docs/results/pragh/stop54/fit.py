"""Least squares of log queries/s on scheme and place, with a term per round (so the
host's speed in that round cancels), over `bench pragh uniform --schemes
Orig,Orig-again,Split` runs. Needs numpy (`pip install numpy`).

usage: python3 fit.py rev:PREFIX bal:PREFIX ...   (run in the directory that holds the runs)
"""
import glob
import json
import math
import sys

import numpy as np

from order import NAMES, order

rounds = []
for arg in sys.argv[1:]:
    mode, prefix = arg.split(":")
    for d in sorted(glob.glob(f"{prefix}_*/pragh-uniform.runs.json")):
        for rnd, rows in enumerate(json.load(open(d))):
            q = {r["scheme"]: r["throughput_qps"] for r in rows}
            rounds.append((order(3, rnd, mode == "bal"), q))
R = len(rounds)
X, y = [], []
for k, (o, q) in enumerate(rounds):
    for place, i in enumerate(o):
        row = np.zeros(R + 4)
        row[k] = 1
        if i > 0:
            row[R + i - 1] = 1  # Orig-again, Split against Orig
        if place > 0:
            row[R + 1 + place] = 1  # second, third place against first
        X.append(row)
        y.append(math.log(q[NAMES[i]]))
X, y = np.array(X), np.array(y)
b, _, rank, _ = np.linalg.lstsq(X, y, rcond=None)
res = y - X @ b
cov = (res @ res) / (len(y) - rank) * np.linalg.pinv(X.T @ X)
print(f"{' '.join(sys.argv[1:])}: {R} rounds")
for name, j in [("Orig-again / Orig", R), ("Split / Orig", R + 1),
                ("second place / first", R + 2), ("third place / first", R + 3)]:
    print(f"  {name:22} {math.exp(b[j]):.4f} ± {math.sqrt(cov[j, j]):.4f}")
