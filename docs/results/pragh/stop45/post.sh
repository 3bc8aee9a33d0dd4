#!/usr/bin/env bash
# post.sh: the committed binary (locus-idle) against the base (locus-base), uniform alternating; then req. 7's five rounds.
set -u
mkdir -p pu
for r in 1 2; do
  if [ $r -eq 1 ]; then order="base idle"; else order="idle base"; fi
  for v in $order; do
    timeout 900 ./locus-$v bench pragh uniform --preset quick --schemes Orig,Split --runs 6 --out pu/$v-$r > pu/$v-$r.log 2>&1
    echo "$(date +%T) uniform round $r $v rc=$?"
  done
done
timeout 1500 ./locus-idle bench pragh schemes --preset quick --runs 5 --out schemes-quick-5 > schemes-quick-5.log 2>&1
echo "$(date +%T) schemes-quick-5 rc=$?"
echo finished
