#!/usr/bin/env bash
set -u
OUT=$1; ROUNDS=$2
mkdir -p $OUT
for r in $(seq 1 $ROUNDS); do
  if [ $((r % 2)) -eq 1 ]; then order="base spin50"; else order="spin50 base"; fi
  for v in $order; do
    timeout 900 ./locus-$v bench pragh put-heavy --preset quick --runs 1 --out $OUT/$v-$r > $OUT/$v-$r.log 2>&1
    echo "$(date +%T) round $r $v rc=$?"
  done
done
echo finished
