#!/bin/bash
# Stop 50 A/B/C: listen (6b01c29), scr (screening + inline rates), scrvec (screening, rates in a Vec).
cd /tmp/ab50
for i in 5 6 7; do
  for b in scrvec listen scr; do
    /tmp/locus-$b bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab50/u_${b}_$i > /tmp/ab50/u_${b}_$i.log 2>&1
    echo "u $b $i $(date +%T)"
  done
done
