#!/bin/bash
# A/B: new (bc08862, monitor only) vs listen (coordinator listens an interval first).
cd /tmp/ab
for i in 1 2; do
  for b in new listen; do
    /tmp/locus-$b bench pragh uniform --preset quick --schemes Orig,Orig-again,Split,Split+Cache --runs 6 --out /tmp/ab/L_u_${b}_$i > /tmp/ab/L_u_${b}_$i.log 2>&1
    echo "u $b $i $(date +%T)"
  done
done
for b in new listen; do
  /tmp/locus-$b bench pragh schemes --preset quick --schemes Orig,Split,Split+Cache,Replica --runs 3 --out /tmp/ab/L_s_${b} > /tmp/ab/L_s_${b}.log 2>&1
  echo "s $b $(date +%T)"
done
