#!/bin/bash
# Stop 53: req. 7 by the protocol with every scheme warmed by one rule: five runs of
# `bench pragh schemes --preset quick` as a user would type it (eqwarm = c16a3de).
cd /tmp/ab52
for i in 1 2 3 4 5; do
  echo "schemes $i $(date -u +%T)"
  /tmp/locus-eqwarm bench pragh schemes --preset quick --out /tmp/ab52/s_eqwarm_$i > /tmp/ab52/s_eqwarm_$i.log 2>&1
done
echo "end $(date -u +%T)"
