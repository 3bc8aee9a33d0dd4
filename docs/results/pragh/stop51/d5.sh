#!/bin/bash
# Stop 51 diagnostic (diag5 = hot build + LOCUS_DIAG_JOBS_MAX): the full driver with its job queue of 2^20 slots (24 MB, the default) or 4,096, alternating.
cd /tmp/ab51
for i in 1 2 3 4 5; do
  /tmp/locus-diag5 bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab51/d5_big_$i > /tmp/ab51/d5_big_$i.log 2>&1
  echo "big $i $(date +%T)"
  LOCUS_DIAG_JOBS_MAX=4096 /tmp/locus-diag5 bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab51/d5_small_$i > /tmp/ab51/d5_small_$i.log 2>&1
  echo "small $i $(date +%T)"
done
