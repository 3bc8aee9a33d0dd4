"""Rows of several runs of one `bench pragh` command, side by side: each
run's row (the median of its interleaved rounds) for every scheme, and the
largest over the smallest across the runs (req. 7: five runs within 10%).

usage: python3 across.py DIR1/pragh-schemes.json DIR2/pragh-schemes.json ...
"""
import json
import sys

runs = [json.load(open(f)) for f in sys.argv[1:]]
schemes = [r['scheme'] for r in runs[0]]


def cells(key, fmt):
    out = []
    for s in schemes:
        vals = [{r['scheme']: r for r in run}[s][key] for run in runs]
        spread = max(vals) / min(vals) if min(vals) > 0 else float('nan')
        out.append((s, ' '.join(fmt % v for v in vals), spread))
    return out


for key, fmt, title in [('throughput_qps', '%.0f', 'queries/s'),
                        ('vs_orig', '%.3f', 'vs Orig'),
                        ('vs_ideal', '%.3f', 'vs Ideal'),
                        ('remote_gets', '%.4f', 'remote GETs')]:
    print(f'\n{title}, run by run (each the median of its rounds), max/min:')
    for s, vals, spread in cells(key, fmt):
        flag = '' if spread <= 1.10 else '  > 1.10'
        print(f'  {s:12} {vals:60} {spread:.3f}{flag}')
