#!/bin/bash
# Stop 55: Ideal, Orig and Replica with the quick preset's measured window (2 s) against a
# 6 s one (--measure-s 6), alternating, three runs each (plus the two default-budget runs of
# chain2: rb_def_*; its 8 MiB run rb_8_1 showed the budget never binds); then schemes at full.
cd /tmp/s55
while pgrep -f "locus-55 bench pragh" > /dev/null; do sleep 5; done
for i in 1 2 3; do
  echo "measure 6 s $i $(date -u +%T)"
  /tmp/locus-55 bench pragh schemes --preset quick --schemes Ideal,Orig,Replica --measure-s 6 --out /tmp/s55/m6_$i > /tmp/s55/m6_$i.log 2>&1
  echo "measure 2 s $i $(date -u +%T)"
  /tmp/locus-55 bench pragh schemes --preset quick --schemes Ideal,Orig,Replica --out /tmp/s55/m2_$i > /tmp/s55/m2_$i.log 2>&1
done
echo "full $(date -u +%T)"
/tmp/locus-55 bench pragh schemes --preset full --out /tmp/s55/f_1 > /tmp/s55/f_1.log 2>&1
echo "end $(date -u +%T)"
