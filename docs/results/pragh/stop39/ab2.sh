#!/bin/bash
# ab2.sh ROUNDS EXP SCHEMES NAME=BINARY... : binaries alternating, one process each per round.
set -u
ROUNDS=$1; EXP=$2; SCHEMES=$3; shift 3
for r in $(seq 1 "$ROUNDS"); do
  for spec in "$@"; do
    v=${spec%%=*}; B=${spec#*=}
    timeout 900 "$B" bench pragh "$EXP" --preset quick --schemes "$SCHEMES" --runs 1 --out out-$v-$r > log-$v-$r 2>&1
    python3 - out-$v-$r/pragh-$EXP.runs.json "$v" "$r" <<'PY'
import json, sys
q = {row['scheme']: row for run in json.load(open(sys.argv[1])) for row in run}
o = q['Orig']['throughput_qps']
print(sys.argv[2], sys.argv[3], ' '.join('%s %d x%.3f mv %d rem %.4f bg %.3f w %.1f' % (s, r['throughput_qps'], r['throughput_qps']/o,
      r['values_moved'], r['remote_gets'], r['measure_background_share'], r.get('warmup_s', -1)) for s, r in q.items()), flush=True)
PY
  done
done
