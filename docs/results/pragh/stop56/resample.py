"""Would more rounds per row make five runs of `schemes --preset quick`
agree within 10%? Draws rounds independently, with replacement, from stop
55's fifteen rounds of each scheme (`../stop55/s_*`), makes five rows as the
median of k rounds each, and counts the draws in which every scheme's ratio
is within 10% (max/min <= 1.10). Independent draws flatter the answer: the
host's slow spells last minutes, so neighbouring rounds are alike.

python3 resample.py    (seed 1; 4,000 draws for k = 3, 5; 3,000 for k = 7, 9)
"""
import json
import random
import statistics as st

random.seed(1)
seqs = {}
for sch in ["Ideal", "Orig", "Shard", "Split", "Cache", "Split+Cache", "Replica"]:
    seq = []
    for i in range(1, 6):
        for rnd in json.load(open(f"../stop55/s_{i}/pragh-schemes.runs.json")):
            seq += [(r["vs_orig"], r["vs_ideal"]) for r in rnd if r["scheme"] == sch]
    seqs[sch] = seq


def worst(k, idxs):
    w = 0.0
    for idx in idxs:
        for seq in seqs.values():
            meds = [st.median(random.choice(seq)[idx] for _ in range(k)) for _ in range(5)]
            w = max(w, max(meds) / min(meds))
    return w


for k, draws in ((3, 4000), (5, 4000), (7, 3000), (9, 3000)):
    for idxs, what in (((0,), "vs Orig"), ((1,), "vs Ideal"), ((0, 1), "both")):
        ws = [worst(k, idxs) for _ in range(draws)]
        ok = sum(w <= 1.10 for w in ws) / draws
        print(f"k={k} {what:8}: every ratio within 10% in {100 * ok:.0f}% of draws")
