"""Per variant of a directory of <variant>-<round>/pragh-schemes.runs.json: each scheme's
queries/s by round, median, and the medians of worker preemptions and p99 update latency;
then each variant's per-round ratio to `off` (same round) for Split+Cache and Replica."""
import glob
import json
import statistics as st
import sys

D = sys.argv[1]
per = {}
for f in sorted(glob.glob(f'{D}/*/pragh-schemes.runs.json')):
    v, r = f.split('/')[-2].split('-')
    rows = {x['scheme']: x for rr in json.load(open(f)) for x in rr}
    per.setdefault(v, []).append((int(r), rows))
for v, L in sorted(per.items()):
    L.sort(key=lambda t: t[0])
    for s in ['Ideal', 'Orig', 'Split+Cache', 'Replica']:
        q = [rows[s]['throughput_qps'] for _, rows in L]
        pre = st.median([rows[s]['measure_worker_preempted'] for _, rows in L])
        p99 = st.median([rows[s]['update_p99_us'] for _, rows in L])
        print(f"{v:6}{s:12}", ' '.join('%6.0f' % x for x in q),
              'median %.0f [%.0f-%.0f]' % (st.median(q), min(q), max(q)),
              'preempted %d' % pre, 'p99 update %d us' % p99)
for v in sorted(per):
    if v == 'off':
        continue
    for s in ['Split+Cache', 'Replica']:
        rs = [a[s]['throughput_qps'] / b[s]['throughput_qps']
              for (_, a), (_, b) in zip(sorted(per[v], key=lambda t: t[0]),
                                        sorted(per['off'], key=lambda t: t[0]))]
        print(v, s, '/ off per round', ' '.join('%.3f' % x for x in rs),
              'median %.3f' % st.median(rs))
