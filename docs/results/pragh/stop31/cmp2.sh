#!/bin/sh
# Interleaved: before/after binaries, schemes quick (skewed starts).
cd /work/scratch
for i in 1 2; do
  for b in $*; do
    ./$b bench pragh schemes --preset quick --schemes Orig,Split,Split+Cache,Replica --runs 3 --out prof/cmps-$b-$i >/dev/null 2>&1
  done
done
