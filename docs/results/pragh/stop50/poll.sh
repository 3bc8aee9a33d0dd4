#!/bin/bash
# Stop 50: diagnostic build (scr + LOCUS_DIAG_HOT_POLL_MS): the monitor polling every 100 ms (default) vs every 1000 ms, alternating.
cd /tmp/ab50
for i in 1 2 3; do
  for p in 100 1000; do
    LOCUS_DIAG_HOT_POLL_MS=$p /tmp/locus-diagpoll bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab50/poll${p}_$i > /tmp/ab50/poll${p}_$i.log 2>&1
    echo "poll $p $i $(date +%T)"
  done
done
