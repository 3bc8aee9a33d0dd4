#!/bin/bash
# Stop 54: warm-ups on the same graph (undo = this stop's build: the first warm-up draw's
# inserts stay, later draws' inserts are undone right after) against every warm-up draw
# inserting its edges (final = the balanced order and middle-pair median only), alternating:
# the default uniform command and the schemes command at --preset quick.
cd /tmp/ab54
for i in 1 2; do
  for b in undo final; do
    echo "uniform $b $i $(date -u +%T)"
    /tmp/locus-$b bench pragh uniform --preset quick --out /tmp/ab54/hu_${b}_$i > /tmp/ab54/hu_${b}_$i.log 2>&1
  done
  for b in undo final; do
    echo "schemes $b $i $(date -u +%T)"
    /tmp/locus-$b bench pragh schemes --preset quick --out /tmp/ab54/hs_${b}_$i > /tmp/ab54/hs_${b}_$i.log 2>&1
  done
done
echo "end $(date -u +%T)"
