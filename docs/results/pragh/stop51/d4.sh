#!/bin/bash
# Stop 51 diagnostic (diag4 = hot build + env switches): Split without a driver (LOCUS_DIAG_NO_DRIVER=1), its
# warm-up one round (0.8 s) as usual, or kept going to 3.4 s as with a driver (LOCUS_DIAG_LONG_WARM=3.4, every scheme), alternating.
cd /tmp/ab51
for i in 1 2 3 4 5; do
  LOCUS_DIAG_NO_DRIVER=1 /tmp/locus-diag4 bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab51/d4_short_$i > /tmp/ab51/d4_short_$i.log 2>&1
  echo "short $i $(date +%T)"
  LOCUS_DIAG_NO_DRIVER=1 LOCUS_DIAG_LONG_WARM=3.4 /tmp/locus-diag4 bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab51/d4_long_$i > /tmp/ab51/d4_long_$i.log 2>&1
  echo "long $i $(date +%T)"
done
