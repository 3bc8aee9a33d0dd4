#!/bin/bash
# Before/after the fetch buffer change, alternating; Ideal, Split+Cache, Replica at quick, one run each per process.
for r in 1 2 3 4; do
  for v in before after; do
    case $v in before) B=/work/scratch/s34/locus-diag3;; after) B=/work/scratch/s34/locus-memset;; esac
    timeout 600 $B bench pragh schemes --preset quick --schemes Ideal,Split+Cache,Replica --runs 1 --out out-$v-$r > log-$v-$r 2>&1
    python3 -c "
import json
d=json.load(open('out-$v-$r/pragh-schemes.runs.json'))
print('$v $r', ' '.join('%s %.0f hand %.0f'%(x['scheme'],x['throughput_qps'],x['measure_host_handoff_ns']) for run in d for x in run))"
  done
done
