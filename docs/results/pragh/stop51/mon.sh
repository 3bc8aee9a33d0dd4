#!/bin/bash
# Stop 51 diagnostic: diagmon (hot build + LOCUS_DIAG_NO_MONITOR: the monitor thread wakes every 100 ms and does nothing; the coordinator gets no event) vs the same binary with a working monitor, alternating.
cd /tmp/ab51
for i in 1 2 3 4 5 6; do
  /tmp/locus-diagmon bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab51/mon_full_$i > /tmp/ab51/mon_full_$i.log 2>&1
  echo "full $i $(date +%T)"
  LOCUS_DIAG_NO_MONITOR=1 /tmp/locus-diagmon bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab51/mon_none_$i > /tmp/ab51/mon_none_$i.log 2>&1
  echo "none $i $(date +%T)"
done
