#!/bin/bash
# Stop 50: one worker thread, so the driver has a core the workers do not use (as Pragh gives its monitor cores of its own).
cd /tmp/ab50
for i in 1 2 3; do
  /tmp/locus-scr bench pragh uniform --preset quick --threads 1 --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab50/t1_scr_$i > /tmp/ab50/t1_scr_$i.log 2>&1
  echo "t1 scr $i $(date +%T)"
done
