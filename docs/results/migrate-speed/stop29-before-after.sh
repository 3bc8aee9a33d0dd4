#!/bin/bash
# Before: locus-s29b, built at f4e328e (the bench flags only). After: locus-s29j, built at 69d3a33
# (migrate_batch caching its moved keys together). Five rounds, each binary once per
# round (3 runs per row inside), alternating; nothing else ran on the machine.
for i in 1 2 3 4 5; do
  for b in /work/scratch/locus-s29b /work/scratch/locus-s29j; do
    echo "== $b round $i"
    $b bench migrate-speed --no-tcp --threads 1,2 --payloads 64,256,1024,4096 --runs 3 --preset full --json 2>/dev/null | python3 -c "import json,sys; r=json.load(sys.stdin); print(' '.join('t%d/%d:%s'%(x['threads'],x['payload_bytes'],','.join('%.0f'%v for v in x['values_per_s_runs'])) for x in r))"
  done
done
