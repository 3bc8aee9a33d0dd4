#!/usr/bin/env bash
# abu.sh OUT ROUNDS RUNS: uniform Orig,Split; locus-base vs locus-spin50 alternating processes of --runs RUNS.
set -u
OUT=$1; ROUNDS=$2; RUNS=$3
mkdir -p $OUT
for r in $(seq 1 $ROUNDS); do
  if [ $((r % 2)) -eq 1 ]; then order="base spin50"; else order="spin50 base"; fi
  for v in $order; do
    timeout 900 ./locus-$v bench pragh uniform --preset quick --schemes Orig,Split --runs $RUNS --out $OUT/$v-$r > $OUT/$v-$r.log 2>&1
    echo "$(date +%T) round $r $v rc=$?"
  done
done
echo finished
