#!/bin/bash
# Stop 52: full driver (diag4, no env) vs full driver with every scheme warmed to 3.4 s (LOCUS_DIAG_LONG_WARM=3.4), alternating.
cd /tmp/ab52
for i in 1 2 3 4 5 6 7 8; do
  /tmp/locus-diag4 bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab52/e_full_$i > /tmp/ab52/e_full_$i.log 2>&1
  echo "full $i $(date +%T)"
  LOCUS_DIAG_LONG_WARM=3.4 /tmp/locus-diag4 bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab52/e_eq_$i > /tmp/ab52/e_eq_$i.log 2>&1
  echo "eq $i $(date +%T)"
done
