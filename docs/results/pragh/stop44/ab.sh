#!/usr/bin/env bash
# ab.sh OUT ROUNDS EXPERIMENT SCHEMES: locus-base vs locus-spin50, alternating processes, one round each.
set -u
OUT=$1; ROUNDS=$2; EXP=$3; SCH=$4
mkdir -p $OUT
for r in $(seq 1 $ROUNDS); do
  if [ $((r % 2)) -eq 1 ]; then order="base spin50"; else order="spin50 base"; fi
  for v in $order; do
    timeout 600 ./locus-$v bench pragh $EXP --preset quick --schemes $SCH --runs 1 --out $OUT/$v-$r > $OUT/$v-$r.log 2>&1
    echo "$(date +%T) round $r $v rc=$?"
  done
done
echo finished
