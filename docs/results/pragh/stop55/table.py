"""Runs of one `bench pragh` command as one markdown table: each cell the
median of the runs' rows (each row itself the median of its run's rounds),
with [min-max] over the runs for throughput and the ratios, and the largest
over the smallest across runs (req. 7: five runs within 10%).

usage: python3 table.py DIR1/pragh-schemes.json DIR2/pragh-schemes.json ...
"""
import json
import statistics
import sys

runs = [json.load(open(f)) for f in sys.argv[1:]]
schemes = [r['scheme'] for r in runs[0]]
med = statistics.median


def col(s, key):
    return [{r['scheme']: r for r in run}[s][key] for run in runs]


print('| scheme | queries/s | p50 us | p99 us | remote GETs | remote ops | away | moved MB '
      '| replicas | vs Orig | vs Ideal | max/min (q/s, vs Orig, vs Ideal) |')
print('|---|---|---|---|---|---|---|---|---|---|---|---|')
for s in schemes:
    q, o, i = col(s, 'throughput_qps'), col(s, 'vs_orig'), col(s, 'vs_ideal')
    sp = lambda v: max(v) / min(v) if min(v) > 0 else float('nan')
    print(f'| {s} | {med(q):,.0f} [{min(q):,.0f}-{max(q):,.0f}] '
          f'| {med(col(s, "p50_us")):.1f} | {med(col(s, "p99_us")):.0f} '
          f'| {100 * med(col(s, "remote_gets")):.1f}% | {100 * med(col(s, "remote_rate")):.1f}% '
          f'| {100 * med(col(s, "migrated_fraction")):.2f}% | {med(col(s, "bytes_moved")) / 1e6:.1f} '
          f'| {100 * med(col(s, "replica_share")):.0f}% '
          f'| {med(o):.2f}x [{min(o):.2f}-{max(o):.2f}] '
          f'| {100 * med(i):.1f}% [{100 * min(i):.1f}-{100 * max(i):.1f}] '
          f'| {sp(q):.3f}, {sp(o):.3f}, {sp(i):.3f} |')
