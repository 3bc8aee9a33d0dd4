#!/usr/bin/env bash
while pgrep -f abwait.sh >/dev/null; do sleep 2; done
for r in 4 5 6; do
  for v in wait base; do
    b=./locus-new; [ $v = wait ] && b=./locus-wait
    $b bench pragh schemes --preset quick --schemes Ideal,Orig,Split+Cache,Replica --runs 1 --out skew/$v-$r > skew/$v-$r.log 2>&1
    echo "$(date +%T) skew $v $r"
  done
done
