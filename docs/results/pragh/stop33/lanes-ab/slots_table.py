import json,glob,sys,statistics as st,re
base=sys.argv[1] if len(sys.argv)>1 else 'slots'
rows={}
for f in sorted(glob.glob(f'{base}/*-r*/pragh-schemes.json')):
    m=re.search(r'/([^/]+)-r(\d+)/',f); b,r=m.group(1),int(m.group(2))
    for row in json.load(open(f)):
        rows.setdefault((row['scheme'],b),[]).append((r,row['throughput_qps'],row.get('measure_host_handoff_ns',0)))
for (s,b),v in sorted(rows.items()):
    q=[x[1] for x in v]
    print(f"{s:12s} {b:>6s} median {st.median(q):9.0f} max/min {max(q)/min(q):.3f} | "+"  ".join(f"r{r}:{t:.0f}(h{h:.0f})" for r,t,h in sorted(v)))
