import json, sys, collections
snaps = []; lines = []
for l in open(sys.argv[1]):
    d = json.loads(l)
    if 'snap' in d: snaps.append((d['t'], d['snap']))
    else: lines.append((d['t'], d['line']))
# per thread: first and last seen time, cpu ns, slices, nvcsw
first = {}; last = {}
for t, s in snaps:
    for tid, v in s.items():
        first.setdefault(tid, (t, v)); last[tid] = (t, v)
agg = collections.defaultdict(lambda: [0,0,0,0,0,0.0,1e9,0])
for tid in first:
    t0, v0 = first[tid]; t1, v1 = last[tid]
    name = v1[0].rstrip('0123456789-')
    a = agg[(name, round(t0))]
    a[0] += v1[1]-v0[1]; a[1] += v1[3]-v0[3]; a[2] += v1[4]-v0[4]; a[3] += v1[5]-v0[5]; a[4] += 1
    a[6] = min(a[6], t0); a[7] = max(a[7], t1)
for (name, ts), a in sorted(agg.items(), key=lambda x: x[1][6]):
    print(f"{name:28s} n={a[4]:3d} {a[6]:6.1f}-{a[7]:6.1f}s cpu={a[0]/1e6:9.1f}ms slices={a[1]:7d} vol={a[2]:7d} nonvol={a[3]:6d}")
