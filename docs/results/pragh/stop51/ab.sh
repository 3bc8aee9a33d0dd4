#!/bin/bash
# Stop 51: base (467e750) vs hot (take_hot reads one word, locks only marked shards), alternating.
cd /tmp/ab51
for i in 1 2 3 4 5 6; do
  for b in base hot; do
    /tmp/locus-$b bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab51/u_${b}_$i > /tmp/ab51/u_${b}_$i.log 2>&1
    echo "$b $i $(date +%T)"
  done
done
