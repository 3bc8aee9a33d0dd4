"""Every round of several `bench pragh schemes` runs for one scheme: its
throughput, ratio to Orig and Ideal, remote-GET share, the host around the
window (probe ns per step, core-to-core handoff), and a least-squares fit of
log queries/s (and of log scheme/Ideal) on remote-GET points, probe and
handoff (needs numpy).

usage: python3 rounds.py SCHEME DIR1/pragh-schemes.runs.json DIR2/...
"""
import json
import sys

import numpy as np

scheme = sys.argv[1]
X, y, yi = [], [], []
for f in sys.argv[2:]:
    for k, rnd in enumerate(json.load(open(f))):
        m = {r['scheme']: r for r in rnd}
        s, i, o = m[scheme], m['Ideal'], m['Orig']
        q = s['throughput_qps']
        print(f'{f.split("/")[0]:>10} round {k}: {q:8,.0f} q/s  vs Orig {q / o["throughput_qps"]:6.2f}'
              f'  vs Ideal {q / i["throughput_qps"]:.3f}  remote GETs {100 * s["remote_gets"]:.2f}%'
              f'  probe {s["measure_host_probe_ns"]:.2f} ns  handoff {s["measure_host_handoff_ns"]:4.0f} ns')
        X.append([1, 100 * s['remote_gets'], s['measure_host_probe_ns'],
                  s['measure_host_handoff_ns'] / 100])
        y.append(np.log(q))
        yi.append(np.log(i['throughput_qps']))
X, y, yi = np.array(X), np.array(y), np.array(yi)
for name, t in ((scheme, y), ('Ideal', yi), (f'{scheme} / Ideal', y - yi)):
    b = np.linalg.lstsq(X, t, rcond=None)[0]
    r2 = 1 - ((t - X @ b) ** 2).sum() / ((t - t.mean()) ** 2).sum()
    print(f'log {name}: {b[1]:+.3f} per remote-GET point, {b[2]:+.3f} per probe ns, '
          f'{b[3]:+.3f} per 100 ns of handoff (R^2 {r2:.2f})')
print(f'correlation of {scheme} log q/s with remote GETs {np.corrcoef(X[:, 1], y)[0, 1]:+.2f}, '
      f'probe {np.corrcoef(X[:, 2], y)[0, 1]:+.2f}, handoff {np.corrcoef(X[:, 3], y)[0, 1]:+.2f}')
