#!/usr/bin/env bash
# Four-scheme quick processes: service spins 64 (as committed) vs LOCUS_DIAG_SPINS=$3, alternating.
set -u
OUT=$1; ROUNDS=$2; SP=$3
mkdir -p $OUT
for r in $(seq 1 $ROUNDS); do
  if [ $((r % 2)) -eq 1 ]; then order="s64 sx"; else order="sx s64"; fi
  for v in $order; do
    if [ $v = s64 ]; then e=64; else e=$SP; fi
    LOCUS_DIAG_SPINS=$e timeout 400 ./locus-spins bench pragh schemes --preset quick --schemes Ideal,Orig,Split+Cache,Replica --runs 1 --out $OUT/$v-$r > $OUT/$v-$r.log 2>&1
    echo "$(date +%T) round $r $v rc=$?"
  done
done
echo finished
