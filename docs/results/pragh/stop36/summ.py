import json, sys, glob, statistics as st
# summ.py DIR EXPERIMENT: medians [min-max] per variant and scheme, from out-VARIANT-ROUND/
d, exp = sys.argv[1], sys.argv[2]
data = {}
for f in sorted(glob.glob(f'{d}/out-*/pragh-{exp}.runs.json')):
    v = f.split('/')[-2].split('-')[1]
    for run in json.load(open(f)):
        q = {r['scheme']: r for r in run}
        o = q['Orig']['throughput_qps']
        for s, r in q.items():
            data.setdefault((v, s), []).append((r['throughput_qps'], r['throughput_qps'] / o, r['values_moved'], r['remote_gets'], r['measure_background_share'], r.get('warm_s', 0)))
def m(xs, fmt):
    xs = sorted(xs); return (fmt % st.median(xs)) + ' [' + (fmt % xs[0]) + '-' + (fmt % xs[-1]) + ']'
for (v, s), rows in sorted(data.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print(f'{s:12} {v:5} n={len(rows)} qps {m([r[0] for r in rows], "%.0f")} vsOrig {m([r[1] for r in rows], "%.3f")} moved {min(r[2] for r in rows)}-{max(r[2] for r in rows)} remGETs {m([100*r[3] for r in rows], "%.2f")} bg {m([100*r[4] for r in rows], "%.1f")} warm_s {m([r[5] for r in rows], "%.0f")}')
