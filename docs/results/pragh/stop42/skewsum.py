import json,glob,statistics as st,collections
res=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob('skew-runs/*.runs.json')):
    v=f.split('/')[1].split('-')[0]
    for r in json.load(open(f))[0]:
        res[r['scheme']][v].append((r['throughput_qps'],r['vs_orig'],r['remote_gets'],r['values_moved'],r['measure_worker_preempted']))
print('| scheme | base: queries/s | vs Orig | wait: queries/s | vs Orig |')
print('|---|---|---|---|---|')
for s,d in res.items():
    def f(xs): return '%.0f [%.0f-%.0f]'%(st.median(xs),min(xs),max(xs))
    def g(xs): return '%.2f [%.2f-%.2f]'%(st.median(xs),min(xs),max(xs))
    b=d['base']; w=d['wait']
    print('| %s | %s | %s | %s | %s |'%(s,f([x[0] for x in b]),g([x[1] for x in b]),f([x[0] for x in w]),g([x[1] for x in w])))
for s,d in res.items():
    for v in ['base','wait']:
        print(s,v,'rg',['%.2f'%(100*x[2]) for x in d[v]],'moved',[x[3] for x in d[v]],'preempt',[x[4] for x in d[v]], 'q',[round(x[0]) for x in d[v]])
