#!/usr/bin/env bash
# Replica-only quick runs, default budget vs --replica-mb 8, alternating processes.
set -u
OUT=$1; ROUNDS=$2
mkdir -p $OUT
for r in $(seq 1 $ROUNDS); do
  if [ $((r % 2)) -eq 1 ]; then order="def big"; else order="big def"; fi
  for v in $order; do
    if [ $v = def ]; then extra=""; else extra="--replica-mb 8"; fi
    timeout 300 ./locus-base bench pragh schemes --preset quick --schemes Replica --runs 1 $extra --out $OUT/$v-$r > $OUT/$v-$r.log 2>&1
    echo "$(date +%T) round $r $v rc=$?"
  done
done
echo finished
