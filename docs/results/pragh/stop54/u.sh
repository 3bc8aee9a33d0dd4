#!/bin/bash
# Stop 54: the default uniform command (every scheme, 3 runs) with the balanced order, three times.
cd /tmp/ab54
for i in 1 2 3; do
  /tmp/locus-bal bench pragh uniform --preset quick --out /tmp/ab54/u_bal_$i > /tmp/ab54/u_bal_$i.log 2>&1
  echo "u $i $(date +%T)"
done
