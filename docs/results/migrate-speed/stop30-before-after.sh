#!/bin/bash
# Before: locus-base, built at 21de0be (the end of stop 29). After: locus-s30, built at the
# commit of this script's results section. Five rounds, each binary once per round (3 runs per
# row inside), alternating; nothing else ran on the machine.
for i in 1 2 3 4 5; do
  for b in /work/scratch/locus-base /work/scratch/locus-s30; do
    echo "== $b round $i"
    $b bench migrate-speed --no-tcp --threads 1,2 --payloads 64,256,1024,4096 --runs 3 --preset full --json 2>/dev/null | python3 -c "import json,sys; r=json.load(sys.stdin); print(' '.join('t%d/%d:%s'%(x['threads'],x['payload_bytes'],','.join('%.0f'%v for v in x['values_per_s_runs'])) for x in r))"
  done
done
