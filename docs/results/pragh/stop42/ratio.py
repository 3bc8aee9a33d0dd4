import json,sys,statistics as st
for f in sys.argv[1:]:
    d=json.load(open(f+'/pragh-uniform.runs.json'))
    rs=[]; 
    for rnd in d:
        by={r['scheme']:r for r in rnd}
        rs.append(by['Split']['throughput_qps']/by['Orig']['throughput_qps'])
    o=[ {r['scheme']:r for r in rnd}['Orig']['throughput_qps'] for rnd in d]
    mv=[ {r['scheme']:r for r in rnd}['Split']['values_moved'] for rnd in d]
    print(f, 'Split/Orig median %.3f [%.3f-%.3f] >=1 in %d/%d; Orig %.0f; moved %s'%(st.median(rs),min(rs),max(rs),sum(x>=1 for x in rs),len(rs),st.median(o),mv))
