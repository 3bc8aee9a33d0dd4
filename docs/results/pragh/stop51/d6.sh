#!/bin/bash
# Stop 51 diagnostic (diag6 = hot build + LOCUS_DIAG_DRIVER_DROPPED): Split's driver started as usual and dropped at once
# (its threads joined, its memory freed) vs no driver started at all (LOCUS_DIAG_NO_DRIVER is not in this build: the
# second arm is the full driver), alternating.
cd /tmp/ab51
for i in 1 2 3 4 5; do
  LOCUS_DIAG_DRIVER_DROPPED=1 /tmp/locus-diag6 bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab51/d6_dropped_$i > /tmp/ab51/d6_dropped_$i.log 2>&1
  echo "dropped $i $(date +%T)"
  /tmp/locus-diag6 bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab51/d6_full_$i > /tmp/ab51/d6_full_$i.log 2>&1
  echo "full $i $(date +%T)"
done
