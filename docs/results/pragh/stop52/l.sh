#!/bin/bash
# Stop 53: which position costs, the first loaded or the first warmed? `loadfirst` = c16a3de plus
# LOCUS_DIAG_LOAD_FIRST: every scheme of a round loaded first (in the round's order), then warmed
# in the reverse order; measured in the round's order as before.
cd /tmp/ab52
for i in 1 2 3 4 5 6 7 8; do
  LOCUS_DIAG_LOAD_FIRST=1 /tmp/locus-loadfirst bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab52/l_loadfirst_$i > /tmp/ab52/l_loadfirst_$i.log 2>&1
  echo "loadfirst $i $(date -u +%T)"
done
