#!/bin/bash
# Stop 52: main (8823201) vs eqwarm (every scheme warms by the driver's rule: two rounds of 1.5 intervals at least), alternating.
cd /tmp/ab52
for i in 1 2 3 4 5 6 7 8; do
  for b in main52 eqwarm; do
    /tmp/locus-$b bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab52/w_${b}_$i > /tmp/ab52/w_${b}_$i.log 2>&1
    echo "$b $i $(date +%T)"
  done
done
