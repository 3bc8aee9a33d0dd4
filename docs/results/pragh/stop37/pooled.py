"""Pools stop 37's four-scheme A/B runs (`skew*/`): per binary, medians [min-max] of queries/s and
of each run's ratio to its own Orig. `new` in skew/, skew2/, skew4/ is the `quiet` binary."""
import json, glob, statistics as st
data = {}
for f in sorted(glob.glob('skew*/out-*/pragh-schemes.runs.json')):
    v = f.split('/')[1].split('-')[1]
    v = {'new': 'quiet'}.get(v, v)
    for run in json.load(open(f)):
        q = {r['scheme']: r for r in run}
        o = q['Orig']['throughput_qps']
        for s, r in q.items():
            data.setdefault((s, v), []).append((r['throughput_qps'], r['throughput_qps'] / o))
def m(xs, fmt):
    xs = sorted(xs); return (fmt % st.median(xs)) + ' [' + (fmt % xs[0]) + '-' + (fmt % xs[-1]) + ']'
for (s, v), rows in sorted(data.items()):
    print(f'{s:12} {v:6} n={len(rows):2} qps {m([r[0] for r in rows], "%.0f")} vsOrig {m([r[1] for r in rows], "%.3f")}')
