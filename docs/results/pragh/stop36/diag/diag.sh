#!/bin/bash
# rounds; each round: normal, nodriver, nocount (Orig,Split uniform quick)
set -u
for r in $(seq 1 $1); do
  for v in $VARS; do
    LOCUS_DIAG=$v timeout 600 ./$BIN bench pragh uniform --preset quick --schemes Orig,Split --runs 1 --out d-$v-$r > dlog-$v-$r 2>&1
    python3 - d-$v-$r/pragh-uniform.runs.json $v $r <<'PY'
import json, sys
q = {row['scheme']: row for run in json.load(open(sys.argv[1])) for row in run}
o = q['Orig']['throughput_qps']; s=q['Split']
print(sys.argv[2], sys.argv[3], 'orig %d split x%.3f mv %d bg %.3f pre %d/%d' % (o, s['throughput_qps']/o, s['values_moved'], s['measure_background_share'], q['Orig']['measure_worker_preempted'], s['measure_worker_preempted']), flush=True)
PY
  done
done
