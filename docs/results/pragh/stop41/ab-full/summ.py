"""Prints stop 41's R-MAT 20 A/B (ab.sh): per run and median [min-max] per binary."""
import json, glob, os

rows = {}
for d in sorted(glob.glob(os.path.join(os.path.dirname(__file__) or '.', '*-[0-9]'))):
    which = os.path.basename(d).split('-')[0]
    r = json.load(open(os.path.join(d, 'pragh-schemes.runs.json')))[0][0]
    pa = r['placement_after']
    rows.setdefault(which, []).append({
        'q/s': r['throughput_qps'],
        'remote GETs %': 100 * r['remote_gets'],
        'final placement %': 100 * pa['remote_gets'],
        'at home %': 100 * pa['misplaced_home_gets'],
        'away %': 100 * pa['misplaced_away_gets'],
        'away values': pa['misplaced_away_values'],
        'moved MB': r['bytes_moved'] / 1e6 if 'bytes_moved' in r else float('nan'),
        'approved': r['migrations_approved'],
        'warm s': r['warm_s'],
    })
for which in ('old', 'new'):
    runs = rows[which]
    print(which)
    for k in runs[0]:
        v = sorted(x[k] for x in runs)
        print(f"  {k:18} {v[(len(v) - 1) // 2]:10.2f} [{v[0]:.2f}-{v[-1]:.2f}]  runs: "
              + ", ".join(f"{x[k]:.2f}" for x in runs))
