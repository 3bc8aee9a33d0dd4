#!/bin/bash
# Stop 55, after chain.sh's first uniform run: two more uniform runs; then Replica with its
# default budget (full at quick) against a budget that holds every replica it approves
# (--replica-mb 8 per machine), alternating, three runs each; then schemes at the full preset.
cd /tmp/s55
while pgrep -f "locus-55 bench pragh uniform" > /dev/null; do sleep 5; done
for i in 2 3; do
  echo "uniform $i $(date -u +%T)"
  /tmp/locus-55 bench pragh uniform --preset quick --out /tmp/s55/u_$i > /tmp/s55/u_$i.log 2>&1
done
for i in 1 2 3; do
  echo "budget default $i $(date -u +%T)"
  /tmp/locus-55 bench pragh schemes --preset quick --schemes Ideal,Orig,Replica --out /tmp/s55/rb_def_$i > /tmp/s55/rb_def_$i.log 2>&1
  echo "budget 8 MiB $i $(date -u +%T)"
  /tmp/locus-55 bench pragh schemes --preset quick --schemes Ideal,Orig,Replica --replica-mb 8 --out /tmp/s55/rb_8_$i > /tmp/s55/rb_8_$i.log 2>&1
done
echo "full $(date -u +%T)"
/tmp/locus-55 bench pragh schemes --preset full --out /tmp/s55/f_1 > /tmp/s55/f_1.log 2>&1
echo "end $(date -u +%T)"
