#!/bin/bash
# Stop 50: diagnostic build (scr + LOCUS_DIAG_NO_COORD): the coordinator thread receives every event and drops it, vs the full coordinator, alternating.
cd /tmp/ab50
for i in 1 2 3; do
  /tmp/locus-diagcoord bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab50/coord_full_$i > /tmp/ab50/coord_full_$i.log 2>&1
  echo "coord full $i $(date +%T)"
  LOCUS_DIAG_NO_COORD=1 /tmp/locus-diagcoord bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab50/coord_none_$i > /tmp/ab50/coord_none_$i.log 2>&1
  echo "coord none $i $(date +%T)"
done
