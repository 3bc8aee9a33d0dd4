#!/bin/bash
# Orig vs Split under uniform starts, with the coordinator approving nothing or the monitor reporting nothing.
B=/work/scratch/s34/locus-diag4
for r in 1 2 3 4 5 6; do
  for v in base nodriver; do
    case $v in
      base) E="";;
      nodriver) E="LOCUS_DIAG_NO_DRIVER=1";;
    esac
    env $E timeout 600 $B bench pragh uniform --preset quick --schemes Orig,Split --runs 1 --out out-$v-$r > log-$v-$r 2>&1
    python3 - out-$v-$r/pragh-uniform.runs.json $v $r <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
rows=d if isinstance(d,list) else d.get('runs',d)
def flat(x):
    if isinstance(x,dict) and 'scheme' in x: yield x
    elif isinstance(x,dict):
        for v in x.values(): yield from flat(v)
    elif isinstance(x,list):
        for v in x: yield from flat(v)
q={}
for row in flat(d): q[row['scheme']]=row
o,s=q['Orig'],q['Split']
print(sys.argv[2],sys.argv[3],'orig',round(o['throughput_qps']),'split',round(s['throughput_qps']),'ratio %.4f'%(s['throughput_qps']/o['throughput_qps']),
  'moved',s['values_moved'],'bgS %.2f'%s.get('measure_background_share',0),'bgO %.2f'%o.get('measure_background_share',0),
  'remS %.4f remO %.4f'%(s.get('remote_gets',0),o.get('remote_gets',0)))
PY
  done
done
