#!/usr/bin/env bash
# Alternates the committed binary (base = locus-new, 3ca5c46) and the idle-driver change (wait = locus-wait).
for r in 1 2 3; do
  for v in base wait; do
    b=./locus-new; [ $v = wait ] && b=./locus-wait
    if [ $((r % 2)) = 0 ]; then b2=$b; fi
    $b bench pragh schemes --preset quick --schemes Ideal,Orig,Split+Cache,Replica --runs 1 --out skew/$v-$r > skew/$v-$r.log 2>&1
    echo "$(date +%T) skew $v $r"
  done
done
for v in wait base; do
  b=./locus-new; [ $v = wait ] && b=./locus-wait
  $b bench pragh uniform --preset quick --schemes Orig,Split --runs 10 --out uni10/$v > uni10/$v.log 2>&1
  echo "$(date +%T) uni $v"
done
