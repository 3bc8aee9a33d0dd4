import json,sys,glob,statistics as st
for D in sys.argv[1:]:
  per={}
  for f in sorted(glob.glob(f'{D}/*/pragh-schemes.runs.json')):
    v,rnd=f.split('/')[-2].split('-')
    rows={r['scheme']:r for rr in json.load(open(f)) for r in (rr if isinstance(rr,list) else [rr])}
    per.setdefault(v,[]).append((int(rnd),rows))
  for v,L in sorted(per.items()):
    for s in ['Split+Cache','Replica']:
      x=[rows[s]['throughput_qps']/rows['Ideal']['throughput_qps'] for _,rows in sorted(L,key=lambda t:t[0])]
      print(D,v,s,'vsIdeal',' '.join('%.3f'%t for t in x),'median %.3f'%st.median(x))
