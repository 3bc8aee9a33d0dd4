#!/bin/bash
# Orig/Split pairs under uniform starts, one `bench pragh` process per pair, variants alternating
# round by round. Usage: pairs.sh BINARY ROUNDS NAME=ENV... (ENV is space-separated VAR=VALUE
# settings read by the diagnostic build of diagnostic.diff; empty for the binary as committed).
# Prints one line per pair: variant, round, both throughputs, Split/Orig, values moved, background
# share and remote GETs. Every pair's rows go to out-NAME-ROUND/.
set -u
B=$1; ROUNDS=$2; shift 2
for r in $(seq 1 "$ROUNDS"); do
  for spec in "$@"; do
    v=${spec%%=*}; E=${spec#*=}
    env $E timeout 600 "$B" bench pragh uniform --preset quick --schemes Orig,Split --runs 1 \
      --out out-$v-$r > log-$v-$r 2>&1
    python3 - out-$v-$r/pragh-uniform.runs.json "$v" "$r" <<'PY'
import json, sys
q = {row['scheme']: row for run in json.load(open(sys.argv[1])) for row in run}
o, s = q['Orig'], q['Split']
print(sys.argv[2], sys.argv[3], 'orig', round(o['throughput_qps']), 'split', round(s['throughput_qps']),
      'ratio %.4f' % (s['throughput_qps'] / o['throughput_qps']), 'moved', s['values_moved'],
      'bgS %.2f' % s['measure_background_share'], 'bgO %.2f' % o['measure_background_share'],
      'remS %.4f remO %.4f' % (s['remote_gets'], o['remote_gets']))
PY
  done
done
