"""Medians [min-max] of each scheme's queries/s and ratio to Orig, per binary, over out-NAME-ROUND dirs.
Usage: summ.py EXPERIMENT DIR... (pools the dirs)."""
import json, glob, sys, statistics as st, collections
exp = sys.argv[1]
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for d in sys.argv[2:]:
    for f in sorted(glob.glob(f'{d}/out-*-*/pragh-{exp}.runs.json')):
        v = f.split('/')[-2].split('-')[1]
        q = {r['scheme']: r for run in json.load(open(f)) for r in run}
        o = q['Orig']['throughput_qps']
        for s, r in q.items():
            rows[v][s].append((r['throughput_qps'], r['throughput_qps'] / o, r['values_moved'], r['remote_gets'], r['measure_worker_preempted']))
def m(xs, f='%.3f'):
    return (f + ' [' + f + '-' + f + ']') % (st.median(xs), min(xs), max(xs))
for v, by in rows.items():
    for s, xs in by.items():
        print(f"{v:5} {s:12} n={len(xs):2} qps {m([x[0] for x in xs], '%.0f')}  vs Orig {m([x[1] for x in xs])} >=1 in {sum(x[1] >= 1 for x in xs)}  moved {min(x[2] for x in xs)}-{max(x[2] for x in xs)}  remote GETs {m([100*x[3] for x in xs], '%.2f')}%  preempted/s {st.median([x[4] for x in xs]):.0f}")
