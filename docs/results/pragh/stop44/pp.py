import json,sys,glob,statistics as st
D=sys.argv[1]; res={}
for f in sorted(glob.glob(f'{D}/*/pragh-put-heavy.runs.json')):
    v,rnd=f.split('/')[-2].split('-')
    for rr in json.load(open(f)):
        for r in (rr if isinstance(rr,list) else [rr]):
            res.setdefault((v,r['scheme']),[]).append(r)
for (v,s),L in sorted(res.items(), key=lambda t:(t[0][1],t[0][0])):
    m=lambda k: st.median([r[k] for r in L])
    q=[r['throughput_qps'] for r in L]
    print(f"{s:12} {v:7} n={len(L)} qps {st.median(q):8.0f} [{min(q):.0f}-{max(q):.0f}] upd p50 {m('update_p50_us'):6.1f} p99 {m('update_p99_us'):7.1f} [{min(r['update_p99_us'] for r in L):.0f}-{max(r['update_p99_us'] for r in L):.0f}] p999 {m('update_p999_us'):7.1f} pre {m('measure_worker_preempted'):7.0f} bg {m('measure_background_share'):.3f}")
