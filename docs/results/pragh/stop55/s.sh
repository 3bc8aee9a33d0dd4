#!/bin/bash
# Stop 55: req. 7 by the issue's protocol: five runs of `bench pragh schemes --preset quick`
# as a user would type it, build 6969f66 (balanced order, middle-pair median, undone warm-up inserts).
cd /tmp/s55
for i in 1 2 3 4 5; do
  echo "schemes $i $(date -u +%T)"
  /tmp/locus-55 bench pragh schemes --preset quick --out /tmp/s55/s_$i > /tmp/s55/s_$i.log 2>&1
done
echo "end $(date -u +%T)"
