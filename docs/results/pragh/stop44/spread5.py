import json,sys,statistics as st
d=json.load(open(sys.argv[1]))
schemes=[r['scheme'] for r in d[0]]
print('| scheme | queries/s median [min-max] | max/min | vs Orig median [min-max] | max/min | vs Ideal median [min-max] | max/min | remote GETs | moved |')
print('|---|---|---|---|---|---|---|---|---|')
def f(xs,fmt): return (fmt%st.median(xs))+' ['+(fmt%min(xs))+'-'+(fmt%max(xs))+']'
for s in schemes:
    rows=[ {r['scheme']:r for r in rnd}[s] for rnd in d]
    q=[r['throughput_qps'] for r in rows]; vo=[r['vs_orig'] for r in rows]; vi=[r['vs_ideal'] for r in rows]
    rg=[100*r['remote_gets'] for r in rows]; mv=[r['values_moved'] for r in rows]
    mm=lambda xs: '%.2f'%(max(xs)/min(xs)) if min(xs)>0 else '-'
    print('| %s | %s | %s | %s | %s | %s | %s | %s | %s |'%(s,f(q,'%.0f'),mm(q),f(vo,'%.2f'),mm(vo),f(vi,'%.3f'),mm(vi),f(rg,'%.2f')+'%',f(mv,'%d')))
