import json,sys,glob,statistics as st
D=sys.argv[1]
res={}
for f in sorted(glob.glob(f'{D}/*/pragh-uniform.runs.json')):
    v,rnd=f.split('/')[-2].split('-')
    for r in json.load(open(f)):
        by={x['scheme']:x for x in r}
        res.setdefault(v,[]).append((by['Split']['throughput_qps']/by['Orig']['throughput_qps'], by['Orig']['measure_worker_preempted'], by['Split']['measure_worker_preempted'], by['Split']['update_p99_us'], by['Orig']['update_p99_us'], by['Split']['values_moved']))
for v,L in sorted(res.items()):
    rs=[x[0] for x in L]
    print(f"{v:7} n={len(rs)} Split/Orig median {st.median(rs):.3f} mean {st.mean(rs):.3f} [{min(rs):.3f}-{max(rs):.3f}] >=1 in {sum(x>=1 for x in rs)}; preempt Orig {st.median([x[1] for x in L]):.0f} Split {st.median([x[2] for x in L]):.0f}; upd p99 Orig {st.median([x[4] for x in L]):.0f} Split {st.median([x[3] for x in L]):.0f} us; moved {sorted(set(x[5] for x in L))}")
