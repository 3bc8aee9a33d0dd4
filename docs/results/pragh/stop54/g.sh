#!/bin/bash
# Stop 54: warm-up updates applied once (warm = this stop's build) against every warm-up draw
# inserting its edges (final = the balanced order and middle-pair median, before the warm-up
# change), alternating: the default uniform command and the schemes command at --preset quick.
cd /tmp/ab54
for i in 1 2; do
  for b in final warm; do
    echo "uniform $b $i $(date -u +%T)"
    /tmp/locus-$b bench pragh uniform --preset quick --out /tmp/ab54/gu_${b}_$i > /tmp/ab54/gu_${b}_$i.log 2>&1
  done
  for b in final warm; do
    echo "schemes $b $i $(date -u +%T)"
    /tmp/locus-$b bench pragh schemes --preset quick --out /tmp/ab54/gs_${b}_$i > /tmp/ab54/gs_${b}_$i.log 2>&1
  done
done
echo "end $(date -u +%T)"
