"""Per scheme phase of a sample.py log: CPU ms/s and switches/s of each background thread class,
and the workers' involuntary switches per second in the phase's last worker group (the measurement)."""
import json, sys, collections
for path in sys.argv[1:]:
    snaps = []; marks = []
    for l in open(path):
        d = json.loads(l)
        if 'snap' in d: snaps.append((d['t'], d['snap']))
        elif '...' in d.get('line', '') and 'run ' in d['line']: marks.append((d['t'], d['line'].split()[0]))
    end = snaps[-1][0]
    phases = [(m, t, (marks[i+1][0] if i+1 < len(marks) else end)) for i, (t, m) in enumerate(marks)]
    first = {}; last = {}
    for t, s in snaps:
        for tid, v in s.items():
            first.setdefault(tid, (t, v)); last[tid] = (t, v)
    for name, a, b in phases:
        agg = collections.defaultdict(lambda: [0, 0])
        groups = collections.defaultdict(lambda: [0, 0.0, 1e9, 0])
        for tid in first:
            (t0, v0), (t1, v1) = first[tid], last[tid]
            if not (a <= t0 < b): continue
            cls = v1[0].rstrip('0123456789-')
            if cls == 'locus-worker':
                g = groups[round(t0, 0)]
                g[0] += v1[5] - v0[5]; g[2] = min(g[2], t0); g[1] = max(g[1], t1)
            else:
                agg[cls][0] += v1[1] - v0[1]; agg[cls][1] += (v1[4] - v0[4]) + (v1[5] - v0[5])
        secs = b - a
        bg = ' '.join(f"{c.replace('locus-','')}: {x[0]/1e6/secs:.1f} ms/s {x[1]/secs:.0f} sw/s" for c, x in sorted(agg.items()) if not c.startswith('locus-main') and c not in ('locus-quiet','locus-idle'))
        lastg = max(groups.values(), key=lambda g: g[2]) if groups else None
        wk = f"workers while measuring: {lastg[0]/(lastg[1]-lastg[2]):.0f} preemptions/s" if lastg else ''
        print(f"{path} {name}: {bg}; {wk}")
