# Split / Orig per binary over every pair in unif.txt (rounds of ab.sh; names base*, final*).
import re, statistics as st, sys
d = {}
for l in open(sys.argv[1] if len(sys.argv) > 1 else 'unif.txt'):
    w = l.split()
    v = re.sub(r'\d', '', w[0])
    d.setdefault(v, []).append((float(w[w.index('Split') + 2][1:]), int(w[w.index('Split') + 4])))
for v, xs in d.items():
    rs = sorted(x[0] for x in xs)
    print(v, len(rs), 'median %.3f [%.3f-%.3f]' % (st.median(rs), rs[0], rs[-1]),
          'at or above Orig: %d' % sum(r >= 1 for r in rs),
          'moved %d-%d' % (min(x[1] for x in xs), max(x[1] for x in xs)))
