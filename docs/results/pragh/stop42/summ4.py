import json,sys,glob,statistics as st,collections
res=collections.defaultdict(list)
for d in sorted(glob.glob(sys.argv[1]+'/*-*/pragh-uniform.runs.json')):
    v=d.split('/')[-2].rsplit('-',1)[0]
    rnd=json.load(open(d))[0]; by={r['scheme']:r for r in rnd}
    res[v].append((by['Split']['throughput_qps']/by['Orig']['throughput_qps'],by['Orig']['throughput_qps'],by['Split']['throughput_qps'],by['Split']['values_moved']))
for v,xs in sorted(res.items()):
    r=[x[0] for x in xs]
    print('%-8s n=%2d Split/Orig median %.3f mean %.3f [%.3f-%.3f] >=1 in %d; Orig %.0f Split %.0f; moved %s'%(v,len(r),st.median(r),st.mean(r),min(r),max(r),sum(x>=1 for x in r),st.median([x[1] for x in xs]),st.median([x[2] for x in xs]),[x[3] for x in xs]))
