"""Replica with and without the replica backoff (eb/<off|bo>-<round>/): per round its
queries/s, share of Ideal, approvals in the last warm-up rounds, worker preemptions, p99
update, remote GETs and replica bytes over the graph's; then bo / off per round."""
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
    for r, rows in L:
        R, I = rows['Replica'], rows['Ideal']
        print(v, r, 'Ideal %.0f' % I['throughput_qps'], 'Replica %.0f' % R['throughput_qps'],
              'of Ideal %.3f' % (R['throughput_qps'] / I['throughput_qps']),
              'warm %.1f s' % R['warm_s'], 'last approvals', R['warm_rounds_approved'][-4:],
              'preempted', R['measure_worker_preempted'], 'p99 update %.0f us' % R['update_p99_us'],
              'remote %.2f%%' % (100 * R['remote_gets']), 'replicas %.2fx' % R['replica_share'])
    q = [rows['Replica']['throughput_qps'] for _, rows in L]
    print(v, 'Replica median %.0f [%.0f-%.0f]' % (st.median(q), min(q), max(q)))
rs = [a['Replica']['throughput_qps'] / b['Replica']['throughput_qps']
      for (_, a), (_, b) in zip(sorted(per['bo'], key=lambda t: t[0]),
                                sorted(per['off'], key=lambda t: t[0]))]
print('bo / off per round', ' '.join('%.3f' % x for x in rs), 'median %.3f' % st.median(rs))
