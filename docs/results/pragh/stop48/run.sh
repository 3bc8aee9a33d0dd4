#!/bin/sh
# Five runs of each command as a user would type it, alternating.
B=/work/scratch/locus-base
for i in 1 2 3 4 5; do
  echo "schemes $i $(date -u +%H:%M:%S)"
  $B bench pragh schemes --preset quick --out s$i > s$i.log 2>&1
  echo "uniform $i $(date -u +%H:%M:%S)"
  $B bench pragh uniform --preset quick --out u$i > u$i.log 2>&1
done
echo "end $(date -u +%H:%M:%S)"
