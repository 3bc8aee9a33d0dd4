#!/bin/bash
# Stop 54: reverse order every other round (rev, 12299ea) vs a balanced Williams order (bal), alternating.
cd /tmp/ab54
for i in 1 2 3 4; do
  for b in rev bal; do
    /tmp/locus-$b bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab54/b_${b}_$i > /tmp/ab54/b_${b}_$i.log 2>&1
    echo "$b $i $(date +%T)"
  done
done
