#!/usr/bin/env bash
# abi.sh: locus-spin50 (committed) vs locus-idle (plus stop 42's idle-driver change), alternating.
set -u
mkdir -p ei eiu
for r in 1 2 3 4 5 6; do
  if [ $((r % 2)) -eq 1 ]; then order="spin50 idle"; else order="idle spin50"; fi
  for v in $order; do
    timeout 600 ./locus-$v bench pragh schemes --preset quick --schemes Ideal,Orig,Split+Cache,Replica --runs 1 --out ei/$v-$r > ei/$v-$r.log 2>&1
    echo "$(date +%T) schemes round $r $v rc=$?"
  done
done
for r in 1 2; do
  if [ $((r % 2)) -eq 1 ]; then order="spin50 idle"; else order="idle spin50"; fi
  for v in $order; do
    timeout 900 ./locus-$v bench pragh uniform --preset quick --schemes Orig,Split --runs 6 --out eiu/$v-$r > eiu/$v-$r.log 2>&1
    echo "$(date +%T) uniform round $r $v rc=$?"
  done
done
echo finished
