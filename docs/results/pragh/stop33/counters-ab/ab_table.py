import json,glob,re,statistics as st
def pp(f):
    m=re.search(r'pingpong\s+([\d.]+)',open(f).read()); return float(m.group(1)) if m else 0
out={}
for b in ['s33a','s33b']:
    for r in range(1,13):
        d=f'ab/{b}-r{r}'
        try: runs=json.load(open(f'{d}/pragh-schemes.runs.json'))
        except Exception: continue
        q=[run[0]['throughput_qps'] for run in runs]
        h=[run[0].get('measure_host_handoff_ns',0) for run in runs]
        out.setdefault(b,[]).append((r,q,h,pp(f'{d}.pp')))
for b,v in out.items():
    allq=[x for _,q,_,_ in v for x in q]
    print(f"{b}: runs {len(allq)} median {st.median(allq):.0f} min {min(allq):.0f} max {max(allq):.0f} max/min {max(allq)/min(allq):.3f}")
    for r,q,h,p in v:
        print(f"   r{r:2d} pp-after {p:6.1f} " + " ".join(f"{x:7.0f}" for x in q) + ("  hand " + " ".join(f"{x:5.0f}" for x in h) if any(h) else ""))
