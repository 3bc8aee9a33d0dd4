"""Each scheme's throughput over Orig's in the same round of a uniform run:
median [min-max] and rounds at or above Orig, with the values moved."""
import json
import statistics as st
import sys

d = json.load(open(sys.argv[1]))
for s in [r['scheme'] for r in d[0]]:
    rows = [{r['scheme']: r for r in rnd}[s] for rnd in d]
    vo = [r['vs_orig'] for r in rows]
    print(f"{s:12} vs Orig {st.median(vo):.3f} [{min(vo):.3f}-{max(vo):.3f}] >= 1 in {sum(v >= 1 for v in vo)}/{len(vo)}; moved {[r['values_moved'] for r in rows]}")
