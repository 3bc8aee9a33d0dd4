#!/bin/bash
# Stop 51 A/B: hot (0bdf4d3) vs q (the driver's job queue grows as jobs come instead of 2^20 slots written at start), alternating.
cd /tmp/ab51
for i in 1 2 3 4 5 6; do
  for b in hot q; do
    /tmp/locus-$b bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab51/q_${b}_$i > /tmp/ab51/q_${b}_$i.log 2>&1
    echo "$b $i $(date +%T)"
  done
done
