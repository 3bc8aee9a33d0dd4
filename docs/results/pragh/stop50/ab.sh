#!/bin/bash
# Stop 50 A/B: listen (6b01c29) vs scr (coordinator screens reports, rates inline), alternating.
cd /tmp/ab50
for i in 1 2 3 4; do
  for b in listen scr; do
    /tmp/locus-$b bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab50/u_${b}_$i > /tmp/ab50/u_${b}_$i.log 2>&1
    echo "u $b $i $(date +%T)"
  done
done
for b in listen scr; do
  /tmp/locus-$b bench pragh schemes --preset quick --schemes Orig,Split,Split+Cache,Replica --runs 3 --out /tmp/ab50/s_${b} > /tmp/ab50/s_${b}.log 2>&1
  echo "s $b $(date +%T)"
done
