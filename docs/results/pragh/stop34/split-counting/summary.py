# Makes summary.txt from the four experiments' outputs (run in this directory).
import statistics as st
rows = {}
for d in ['iso', 'samp', 'pos', 'nodrv']:
    for l in open(f'{d}/{d}.txt'):
        f = l.split()
        v, ratio = f[0], float(f[f.index('ratio') + 1])
        moved, rem = int(f[f.index('moved') + 1]), float(f[f.index('remS') + 1])
        rows.setdefault((d, v), []).append((ratio, moved, rem))
names = {'base': 'as committed', 'noapprove': 'counting, nothing approved',
         'noreport': 'counting, no periodic reports', 's1': 'as committed',
         's8': '1 remote GET in 8 counted', 's0': 'no remote GET counted', 'fs1': 'as committed',
         'rs1': 'as committed, Split first', 'fs0': 'no remote GET counted',
         'rs0': 'no remote GET counted, Split first',
         'nodriver': 'counting, no monitor or coordinator'}
print('experiment variant: Split/Orig median [min-max] (n), values moved, Split remote GETs')
for (d, v), r in rows.items():
    q = [x[0] for x in r]
    print('%-5s %-36s %.3f [%.3f-%.3f] (%d)  moved %d-%d  remote GETs %.2f-%.2f%%' % (
        d, names[v], st.median(q), min(q), max(q), len(q), min(x[1] for x in r),
        max(x[1] for x in r), 100 * min(x[2] for x in r), 100 * max(x[2] for x in r)))
pooled = {}
for (d, v), r in rows.items():
    pooled.setdefault(names[v].replace(', Split first', ''), []).extend(x[0] for x in r)
print('pooled over experiments:')
for k, q in pooled.items():
    print('  %-36s %.3f [%.3f-%.3f] (%d)' % (k, st.median(q), min(q), max(q), len(q)))
