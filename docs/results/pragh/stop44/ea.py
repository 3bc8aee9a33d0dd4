import json,sys,glob,statistics as st
D=sys.argv[1]
rows={}
for f in sorted(glob.glob(f'{D}/*/pragh-schemes.runs.json')):
    v=f.split('/')[-2]
    d=json.load(open(f));
    for r in (x for rr in d for x in (rr if isinstance(rr,list) else [rr])):
        if r['scheme']!='Replica': continue
        c=r['measure_cpu_s']
        print(f"{v:8} {r['throughput_qps']:9.0f} remGET {100*r['remote_gets']:5.2f}% repl_share {r['replica_share']:.2f} maxm {r['replica_bytes_machine_max']/1e6:.2f}MB bg {r['measure_background_share']:.3f} pre {r['measure_worker_preempted']:6d} mig {c.get('locus-migrate',0):.2f} svc {c.get('locus-service',0):.2f} warm {r['warm_s']:.1f} lastrounds {r['warm_rounds_approved'][-3:]} probe {r['measure_host_probe_ns']:.2f}")
        rows.setdefault(v.split('-')[0],[]).append(r['throughput_qps'])
for k,v in rows.items():
    print(k, len(v), 'median', st.median(v), 'min', min(v), 'max', max(v), 'max/min %.2f'%(max(v)/min(v)))
