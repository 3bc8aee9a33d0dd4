import json,sys,glob,statistics as st,collections
D=sys.argv[1]
data=collections.defaultdict(lambda: collections.defaultdict(list))
per={}
for f in sorted(glob.glob(f'{D}/*/pragh-schemes.runs.json')):
    v,rnd=f.split('/')[-2].split('-')
    d=json.load(open(f))
    rows={}
    for r in (x for rr in d for x in (rr if isinstance(rr,list) else [rr])):
        rows[r['scheme']]=r
    per[(v,int(rnd))]=rows
    for s,r in rows.items():
        data[v][s].append((int(rnd),r))
for v in sorted(data):
    print('==',v)
    for s in ['Ideal','Orig','Split','Split+Cache','Replica']:
        if s not in data[v]: continue
        L=sorted(data[v][s],key=lambda x:x[0])
        q=[r['throughput_qps'] for _,r in L]
        o=[r['throughput_qps']/per[(v,n)]['Orig']['throughput_qps'] for n,r in L] if 'Orig' in per[(v,L[0][0])] else []
        pre=[r['measure_worker_preempted'] for _,r in L]
        bg=[r['measure_background_share'] for _,r in L]
        print(f"{s:12} qps med {st.median(q):9.0f} [{min(q):.0f}-{max(q):.0f}] max/min {max(q)/min(q):.2f} | vsOrig {st.median(o):.2f} [{min(o):.2f}-{max(o):.2f}] | pre med {st.median(pre):.0f} | bg {st.median(bg):.3f} | remGET {100*st.median([r['remote_gets'] for _,r in L]):.2f}% | upd p99 {st.median([r['update_p99_us'] for _,r in L]):.0f}")
# paired
vs=sorted(data)
if len(vs)==2:
    a,b=vs
    for s in ['Ideal','Orig','Split','Split+Cache','Replica']:
        ra=dict((n,r['throughput_qps']) for n,r in data[a].get(s,[])); rb=dict((n,r['throughput_qps']) for n,r in data[b].get(s,[]))
        pairs=[rb[n]/ra[n] for n in ra if n in rb]
        if pairs: print(f"{s:12} {b}/{a} per round: "+' '.join('%.3f'%x for x in pairs)+f"  median {st.median(pairs):.3f}")
