#!/bin/bash
# ab.sh ROUNDS EXP SCHEMES ARM... ; ARM = name=PREFIXES:NICE (PREFIXES "-" for none)
set -u
ROUNDS=$1; EXP=$2; SCHEMES=$3; shift 3
B=/work/scratch/s39/locus-base
for r in $(seq 1 "$ROUNDS"); do
  for spec in "$@"; do
    v=${spec%%=*}; rest=${spec#*=}; pre=${rest%%:*}; n=${rest#*:}
    if [ "$pre" = "-" ]; then
      timeout 900 $B bench pragh "$EXP" --preset quick --schemes "$SCHEMES" --runs 1 --out out-$v-$r > log-$v-$r 2>&1
    else
      timeout 900 python3 renice.py "$pre" "$n" $B bench pragh "$EXP" --preset quick --schemes "$SCHEMES" --runs 1 --out out-$v-$r > log-$v-$r 2>&1
    fi
    python3 - out-$v-$r/pragh-$EXP.runs.json "$v" "$r" <<'PY'
import json, sys
q = {row['scheme']: row for run in json.load(open(sys.argv[1])) for row in run}
o = q['Orig']['throughput_qps']
print(sys.argv[2], sys.argv[3], ' '.join('%s %d x%.3f mv %d rem %.4f bg %.3f' % (s, r['throughput_qps'], r['throughput_qps']/o,
      r['values_moved'], r['remote_gets'], r['measure_background_share']) for s, r in q.items()), flush=True)
PY
  done
done
