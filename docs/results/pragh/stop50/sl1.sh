#!/bin/bash
# Stop 50: --slices 1 (no turns: a scheme's window in one piece, its driver resumed and paused once a round).
cd /tmp/ab50
for i in 1 2 3; do
  /tmp/locus-scr bench pragh uniform --preset quick --slices 1 --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab50/sl1_scr_$i > /tmp/ab50/sl1_scr_$i.log 2>&1
  echo "sl1 scr $i $(date +%T)"
done
