#!/bin/bash
# Stop 50: stop 49's diagnostic build (bc08862 + LOCUS_EXP=1: Orig-again gets Split's counting store, no driver).
cd /tmp/ab50
for i in 1 2 3 4; do
  LOCUS_EXP=1 /tmp/locus-exp bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab50/exp_$i > /tmp/ab50/exp_$i.log 2>&1
  echo "exp $i $(date +%T)"
done
