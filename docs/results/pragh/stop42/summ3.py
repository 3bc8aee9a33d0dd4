import json,sys,glob,re,statistics as st,collections
out=sys.argv[1]
res=collections.defaultdict(list)
for d in sorted(glob.glob(out+'/*-*/pragh-uniform.runs.json')):
    v=d.split('/')[-2].rsplit('-',1)[0]
    rnd=json.load(open(d))[0]
    by={r['scheme']:r for r in rnd}
    res[v].append((by['Split']['throughput_qps']/by['Orig']['throughput_qps'], by['Orig']['throughput_qps'], by['Split']['values_moved'], by['Split']['remote_gets']))
for v,xs in res.items():
    rs=[x[0] for x in xs]
    print('%-8s n=%2d Split/Orig %.3f [%.3f-%.3f] >=1 in %d; Orig %.0f; moved %s; remGET %.2f%%'%(v,len(xs),st.median(rs),min(rs),max(rs),sum(r>=1 for r in rs),st.median([x[1] for x in xs]),[x[2] for x in xs],100*st.median([x[3] for x in xs])))
