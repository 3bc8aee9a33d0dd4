#!/bin/bash
# Stop 51 diagnostic (diag3 = hot build + env switches): idle monitor waking every 100 ms (LOCUS_DIAG_NO_MONITOR=1),
# idle monitor waking every 5 s (=2), and Split with no driver at all (LOCUS_DIAG_NO_DRIVER=1), rotating.
cd /tmp/ab51
for i in 1 2 3 4; do
  LOCUS_DIAG_NO_MONITOR=1 /tmp/locus-diag3 bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab51/d3_idle100_$i > /tmp/ab51/d3_idle100_$i.log 2>&1
  echo "idle100 $i $(date +%T)"
  LOCUS_DIAG_NO_MONITOR=2 /tmp/locus-diag3 bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab51/d3_idle5s_$i > /tmp/ab51/d3_idle5s_$i.log 2>&1
  echo "idle5s $i $(date +%T)"
  LOCUS_DIAG_NO_DRIVER=1 /tmp/locus-diag3 bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab51/d3_nodrv_$i > /tmp/ab51/d3_nodrv_$i.log 2>&1
  echo "nodrv $i $(date +%T)"
done
